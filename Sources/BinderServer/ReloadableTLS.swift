import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `--tls-cert FILE --tls-key FILE`: the server's certificate chain and key, read at start and
/// again on SIGHUP. Each new connection takes the context current when it opens, so a renewed
/// certificate serves new connections at once while open ones keep theirs. A reload that fails
/// (a missing file, a key that does not match) is logged and the old certificate kept.
public final class TLSCertificates: Sendable {
    public let certificateFile: String
    public let keyFile: String
    /// Guards the context new connections use.
    private let current: Mutex<NIOSSLContext>

    /// Reads both files now: throws `ServeSetupError.tls` naming what is wrong.
    public init(certificateFile: String, keyFile: String) throws(ServeSetupError) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        current = Mutex(try Self.context(certificateFile: certificateFile, keyFile: keyFile))
    }

    var context: NIOSSLContext { current.withLock { $0 } }

    /// Reads the files again; on failure the old context stays.
    func reload() throws(ServeSetupError) {
        let fresh = try Self.context(certificateFile: certificateFile, keyFile: keyFile)
        current.withLock { $0 = fresh }
    }

    private static func context(certificateFile: String, keyFile: String) throws(ServeSetupError) -> NIOSSLContext {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificateFile)
            guard !chain.isEmpty else { throw ServeSetupError.tls(file: certificateFile, detail: "no certificate in it") }
            let key = try NIOSSLPrivateKey(file: keyFile, format: .pem)
            let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                         privateKey: .privateKey(key))
            return try NIOSSLContext(configuration: configuration)
        } catch let error as ServeSetupError {
            throw error
        } catch {
            // NIOSSL's errors name no secret (a failed read, a mismatch): said as they are.
            throw .tls(file: "\(certificateFile), \(keyFile)", detail: "\(error)")
        }
    }
}

/// A child channel that puts TLS (the context current at its opening) in front of `base`.
struct ReloadableTLSChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let certificates: TLSCertificates

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: certificates.context))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Reloads `certificates` on each SIGHUP until the server shuts down.
struct TLSReloadOnHangup: Service {
    let certificates: TLSCertificates
    let logger: Logger

    func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            do {
                try certificates.reload()
                logger.info("TLS certificate reloaded", metadata: ["file": "\(certificates.certificateFile)"])
            } catch {
                logger.error("TLS certificate not reloaded, the old one serves on: \(error)")
            }
        }
    }
}
