// swift-tools-version:6.0
import PackageDescription

// Dependencies point one way:
//   binder (exe) -> BinderCommands -> BinderFUSE -> BinderCore -> {BinderGit, BinderCrypto, BinderFormat}; BinderGit -> BinderCrypto
//   (SHA-1 for a pack's checksums)
//   BinderCommands -> BinderSync -> BinderCore; BinderCommands -> BinderServer -> {BinderGit, BinderCrypto}
//   BinderCommands -> BinderImport -> BinderCore
//   BinderExport -> BinderSystem (SharedLibrarySymbols: Pango's, Cairo's, libjpeg's and poppler-glib's entry points, opened at first use)
// Each C library is imported by exactly one Swift target:
//   CSodium, CSecp256k1, CCrypto (OpenSSL's libcrypto: SHA-256, SHA-1, Poly1305) -> BinderCrypto; CGit2, CBinderZlib -> BinderGit;
//   CFuse3 -> BinderFUSE; CLinux -> BinderSystem; CPangoCairo (Pango, Cairo, libjpeg; poppler-glib, which draws a PDF's pages
//   onto Cairo) -> BinderExport;
//   CQREncode (libqrencode) -> BinderCommands; CZBar (libzbar: reading a QR code in an image) -> BinderCommands;
//   CLibXML2 (libxml2's reader: C-CDA documents) -> BinderImport.
let package = Package(
    name: "binder",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "binder", targets: ["binder"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // Named for its error types (TLS failures are told apart by type) and `binder serve --tls-cert`; async-http-client brings it.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.0"),
        .package(url: "https://github.com/JohnSundell/Ink", from: "0.6.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        // `binder serve --database`: the server's state in PostgreSQL (issue 42).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // SMART Health Cards' ES256 signatures (P-256); postgres-nio brings it already.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.0.0"),
        // Apple Health's export.zip, read in place with its entries checked before they inflate.
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        // `binder serve`'s /metrics: Prometheus' text format from a registry of the server's own.
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `binder serve`'s graceful shutdown (its own ServiceGroup: a deadline); Hummingbird brings it.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // HTTPField names in BinderServer's channel handler (the 503 past a cap); Hummingbird brings it.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CSecp256k1", pkgConfig: "libsecp256k1", providers: [.apt(["libsecp256k1-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CGit2", pkgConfig: "libgit2", providers: [.apt(["libgit2-dev"])]),
        // Not named CZlib: ZIPFoundation's own zlib module is.
        .systemLibrary(name: "CBinderZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CFuse3", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        .systemLibrary(name: "CLibXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        .target(name: "CLinux"),
        // Opened with dlopen at their first use, not linked (each shim.h says why): their headers
        // are in /usr/include (libqrencode-dev, libzbar-dev, libcairo2-dev, libjpeg-dev; scripts/setup), poppler-glib's few
        // declarations in CPangoCairo's popplershim.h (libpoppler-glib-dev checks them: scripts/test).
        .systemLibrary(name: "CQREncode"),
        .systemLibrary(name: "CZBar"),
        .systemLibrary(name: "CPangoCairo"),

        .target(name: "BinderCrypto", dependencies: ["CSodium", "CSecp256k1", "CCrypto"]),
        .target(name: "BinderFormat", dependencies: [.product(name: "Yams", package: "Yams")]),
        .target(name: "BinderGit", dependencies: ["CGit2", "CBinderZlib", "BinderCrypto"]),
        .target(name: "BinderCore", dependencies: [
            "BinderCrypto", "BinderFormat", "BinderGit",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "SystemPackage", package: "swift-system"),
        ]),
        .target(name: "BinderFUSE", dependencies: [
            "CFuse3", "BinderCore",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "SystemPackage", package: "swift-system"),
        ]),
        .target(name: "BinderSystem", dependencies: ["CLinux", "BinderCrypto"]),
        // Accounts and sync: the server's REST calls (login, listing) and fetch-merge-push.
        .target(name: "BinderSync", dependencies: [
            "BinderCore", "BinderCrypto", "BinderFormat", "BinderGit", "BinderSystem",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ]),
        // `binder serve`: the same protocol, self-hosted (Hummingbird for HTTP; git's own
        // upload/receive-pack; CompressNIO inflates gzip request bodies within a limit;
        // PostgresNIO for the database store).
        .target(name: "BinderServer", dependencies: [
            "BinderCrypto", "BinderGit", "BinderSystem",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "CompressNIO", package: "compress-nio"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            .product(name: "PostgresNIO", package: "postgres-nio"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            // `--tls-cert`/`--tls-key`: native TLS, its context swapped on SIGHUP.
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ]),
        // `binder export`: PDF (Pango over Cairo), one-file HTML (Ink), a FHIR R4 document Bundle.
        .target(name: "BinderExport", dependencies: [
            "CPangoCairo", "BinderCore", "BinderFormat", "BinderCrypto", "BinderSystem",
            .product(name: "Ink", package: "Ink"),
        ]),
        // `binder import`: C-CDA (libxml2's reader) and FHIR R4 JSON made records, committed through BinderWriter.
        .target(name: "BinderImport", dependencies: ["CLibXML2", "BinderCore", "BinderCrypto", "BinderFormat", "BinderGit",
                                                     // Raw DEFLATE of SMART Health Cards, within a cap.
                                                     .product(name: "CompressNIO", package: "compress-nio"),
                                                     .product(name: "NIOCore", package: "swift-nio"),
                                                     // A SMART Health Card's signature (ES256), checked against its issuer's keys.
                                                     .product(name: "Crypto", package: "swift-crypto"),
                                                     // Apple Health's export.zip (its own zlib module, CZlib).
                                                     .product(name: "ZIPFoundation", package: "ZIPFoundation")]),
        .target(name: "BinderCommands", dependencies: [
            "BinderExport", "BinderImport", "BinderCore", "BinderFUSE", "BinderGit", "BinderFormat", "BinderSystem", "BinderCrypto",
            "BinderSync", "BinderServer", "CQREncode", "CZBar",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "binder", dependencies: ["BinderCommands"]),
        // Fills a demo binder with realistic records (scripts/demo); not part of the product.
        .executableTarget(name: "binder-demo-data", dependencies: ["BinderCore", "BinderCrypto", "BinderFormat", "BinderGit"]),
        // The cost of the crypto primitives alone, as JSON (scripts/bench); not part of the product.
        .executableTarget(name: "binder-bench", dependencies: ["BinderCrypto"]),

        .testTarget(name: "BinderCryptoTests", dependencies: ["BinderCrypto"], resources: [.copy("Fixtures")]),
        .testTarget(name: "BinderFormatTests", dependencies: ["BinderFormat", .product(name: "Yams", package: "Yams")],
                    resources: [.copy("Fixtures")]),
        .testTarget(name: "BinderCoreTests", dependencies: ["BinderCore", "BinderCrypto", "BinderFormat", "BinderGit",
                                                         .product(name: "Logging", package: "swift-log"),
                                                         .product(name: "SystemPackage", package: "swift-system"),
                                                         .product(name: "PropertyBased", package: "swift-property-based")]),
        .testTarget(name: "BinderGitTests", dependencies: ["BinderGit", "BinderSystem"], resources: [.copy("Fixtures")]),
        .testTarget(name: "BinderExportTests", dependencies: ["BinderExport", "BinderFormat"]),
        // The sync client against an in-process server (no mount): BinderServer's app, driven on loopback.
        .testTarget(name: "BinderSyncTests", dependencies: ["BinderSync", "BinderServer", "BinderCrypto", "BinderGit",
                                                         .product(name: "HummingbirdTesting", package: "hummingbird")]),
        // A private PostgreSQL cluster (initdb, pg_ctl) for the server's tests and the replicas' (BinderCLITests).
        .target(name: "BinderTestPostgres", path: "Tests/BinderTestPostgres"),
        .testTarget(name: "BinderServerTests", dependencies: ["BinderServer", "BinderCrypto", "BinderTestPostgres",
                                                           .product(name: "HummingbirdTesting", package: "hummingbird")]),
        .testTarget(name: "BinderImportTests", dependencies: ["BinderImport", "BinderCore", "BinderCrypto", "BinderFormat", "BinderGit"]),
        .testTarget(name: "BinderCLITests", dependencies: ["BinderCrypto", "BinderFormat", "BinderSystem", "BinderTestPostgres"]),
        // The command line's definitions, in process (help examples against the command tree).
        .testTarget(name: "BinderCommandsTests", dependencies: ["BinderCommands",
                                                             .product(name: "ArgumentParser", package: "swift-argument-parser")]),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets for every decoder of outside bytes (Tests/Fuzz; see README, "Fuzzing").
// scripts/fuzz builds them with -sanitize=fuzzer in .build-fuzz; a plain build makes the same
// code a replayer (`binder-fuzz TARGET FILE...`). Not part of the product.
package.targets += [
    .executableTarget(name: "binder-fuzz", dependencies: ["BinderCrypto", "BinderFormat", "BinderCore", "BinderGit", "BinderImport"],
                      path: "Tests/Fuzz/binder-fuzz"),
    .executableTarget(name: "binder-fuzz-server", dependencies: ["BinderServer", "BinderCrypto"],
                      path: "Tests/Fuzz/binder-fuzz-server"),
]
