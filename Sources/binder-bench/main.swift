// binder-bench: the cost of binder's cryptographic primitives alone, as JSON on stdout, for
// scripts/bench. Not part of the product. Measures, with a conversation key derived once:
//   - NIP-44 v2 decrypt and encrypt of a 4 KB document (µs per document),
//   - a 3 MB DEK sidecar: full decrypt (MB/s) and `Sidecar.plaintextSize` (µs, what a listing pays),
//   - libsodium's raw ChaCha20 (IETF) on 3 MB in place (MB/s): the baseline nothing can beat,
//   - SecureBytes allocation (µs, from the secret-memory arena and back): binder's secret memory,
//   - the process's kernel mappings while 100,000 secrets are held (the arena's point).
// Usage: binder-bench [--quick]
import BinderCrypto
import Foundation

let quick = CommandLine.arguments.contains("--quick")

/// Seconds of monotonic time.
func now() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// Runs `body` `iterations` times per sample, `samples` times; returns seconds per iteration
/// for each sample (after one untimed warm-up sample).
func measure(iterations: Int, samples: Int, _ body: () throws -> Void) rethrows -> [Double] {
    for _ in 0..<max(1, iterations / 10) { try body() }
    var out: [Double] = []
    for _ in 0..<samples {
        let start = now()
        for _ in 0..<iterations { try body() }
        out.append((now() - start) / Double(iterations))
    }
    return out
}

func median(_ values: [Double]) -> Double {
    let s = values.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// A deterministic "document": JSON-looking text of `count` bytes.
func documentBytes(_ count: Int) -> [UInt8] {
    let line = Array("{\"value\":\"# Visit\\n\\nBP 138/88 mmHg, lisinopril 10 mg daily, recheck in 3 months.\\n\",\"metadata\":{}}\n".utf8)
    return (0..<count).map { line[$0 % line.count] }
}

/// The figures, under the keys scripts/bench.py reads (its `primitives`).
struct Results: Encodable {
    var nip44Decrypt4kUs = 0.0
    var nip44Decrypt4kUsSamples: [Double] = []
    var nip44Encrypt4kUs = 0.0
    var nip44Encrypt4kUsSamples: [Double] = []
    var sidecarDecrypt3mMBs = 0.0
    var sidecarDecrypt3mMBsSamples: [Double] = []
    var sidecarEncrypt3mMBs = 0.0
    var sidecarSizeUs = 0.0
    var chacha20RawMBs = 0.0
    var chacha20RawMBsSamples: [Double] = []
    var chacha20Raw4kUs = 0.0
    var secureBytesAlloc4kUs = 0.0
    var arenaMapsBefore = 0
    var arena100kMaps = 0
    var arena100kMiB = 0.0
    var arena100kRegions = 0
    var samples = 0
    var quick = false

    enum CodingKeys: String, CodingKey {
        case nip44Decrypt4kUs = "nip44_decrypt_4k_us", nip44Decrypt4kUsSamples = "nip44_decrypt_4k_us_samples"
        case nip44Encrypt4kUs = "nip44_encrypt_4k_us", nip44Encrypt4kUsSamples = "nip44_encrypt_4k_us_samples"
        case sidecarDecrypt3mMBs = "sidecar_decrypt_3m_mb_s", sidecarDecrypt3mMBsSamples = "sidecar_decrypt_3m_mb_s_samples"
        case sidecarEncrypt3mMBs = "sidecar_encrypt_3m_mb_s", sidecarSizeUs = "sidecar_size_us"
        case chacha20RawMBs = "chacha20_raw_mb_s", chacha20RawMBsSamples = "chacha20_raw_mb_s_samples"
        case chacha20Raw4kUs = "chacha20_raw_4k_us", secureBytesAlloc4kUs = "securebytes_alloc_4k_us"
        case arenaMapsBefore = "arena_maps_before", arena100kMaps = "arena_100k_maps", arena100kMiB = "arena_100k_mib"
        case arena100kRegions = "arena_100k_regions", samples, quick
    }
}

var results = Results()
let samples = quick ? 3 : 7
let secret = try SecretKey.generate()
let key = try NIP44.ConversationKey(selfOf: secret)

// NIP-44, 4 KB document, key cached (the conversation key is derived once, as in the daemon).
let document = documentBytes(4096)
let payload = Array(try NIP44.encrypt(document, key: key).utf8)
let roundTrip = try NIP44.decrypt(payload: payload, key: key).copyBytes()
precondition(roundTrip == document)
let docIterations = quick ? 2_000 : 10_000
let decryptTimes = try measure(iterations: docIterations, samples: samples) { _ = try NIP44.decrypt(payload: payload, key: key) }
let encryptTimes = try measure(iterations: docIterations, samples: samples) { _ = try NIP44.encrypt(document, key: key) }
results.nip44Decrypt4kUs = median(decryptTimes) * 1e6
results.nip44Decrypt4kUsSamples = decryptTimes.map { $0 * 1e6 }
results.nip44Encrypt4kUs = median(encryptTimes) * 1e6
results.nip44Encrypt4kUsSamples = encryptTimes.map { $0 * 1e6 }

// Sidecar (DEK format, 0x02), 3 MB attachment.
let attachmentSize = 3 << 20
var attachment = [UInt8](repeating: 0, count: attachmentSize)
for i in 0..<attachmentSize { attachment[i] = UInt8(truncatingIfNeeded: i &* 2_654_435_761 >> 13) }
let sidecar = try Sidecar.encrypt(attachment, key: key)
let sidecarRoundTrip = try Sidecar.decrypt(sidecar, key: key).copyBytes()
precondition(sidecarRoundTrip == attachment)
precondition(Sidecar.plaintextSize(sidecar, key: key) == attachmentSize)
let sidecarIterations = quick ? 5 : 20
let sidecarTimes = try measure(iterations: sidecarIterations, samples: samples) { _ = try Sidecar.decrypt(sidecar, key: key) }
let mb = Double(attachmentSize) / 1e6
results.sidecarDecrypt3mMBs = mb / median(sidecarTimes)
results.sidecarDecrypt3mMBsSamples = sidecarTimes.map { mb / $0 }
let sidecarEncryptTimes = try measure(iterations: sidecarIterations, samples: samples) { _ = try Sidecar.encrypt(attachment, key: key) }
results.sidecarEncrypt3mMBs = mb / median(sidecarEncryptTimes)
let sizeTimes = measure(iterations: quick ? 200 : 1_000, samples: samples) { _ = Sidecar.plaintextSize(sidecar, key: key) }
results.sidecarSizeUs = median(sizeTimes) * 1e6

// libsodium's raw ChaCha20 over the same 3 MB: the floor for any stream-cipher decryption.
var buffer = attachment
let chachaTimes = measure(iterations: quick ? 20 : 100, samples: samples) { chacha20Benchmark(buffer: &buffer) }
results.chacha20RawMBs = mb / median(chachaTimes)
results.chacha20RawMBsSamples = chachaTimes.map { mb / $0 }
// What raw ChaCha20 alone costs for a 4 KB document, for comparison with the NIP-44 figure.
var small = document
let chachaSmall = measure(iterations: docIterations, samples: samples) { chacha20Benchmark(buffer: &small) }
results.chacha20Raw4kUs = median(chachaSmall) * 1e6

// Secret memory: every decrypted document and every intermediate key lives in SecureBytes.
let allocTimes = measure(iterations: docIterations, samples: samples) { _ = try? SecureBytes(zeroed: 4096) }
results.secureBytesAlloc4kUs = median(allocTimes) * 1e6

/// Lines of /proc/self/maps: the kernel's mappings of this process (at most 65,530 by default).
/// (Read with stdio: /proc files report a size of 0, which Foundation's readers trust.)
func mappingCount() -> Int {
    guard let file = fopen("/proc/self/maps", "r") else { return -1 }
    defer { fclose(file) }
    var lines = 0
    while true {
        let c = getc(file)
        if c == EOF { break }
        if c == 10 { lines += 1 }
    }
    return lines
}
// 100,000 secrets of 0.2–4 KB, as a cache of 100,000 documents holds them.
results.arenaMapsBefore = mappingCount()
var held: [SecureBytes] = []
held.reserveCapacity(100_000)
var sizeState: UInt64 = 1
for _ in 0..<100_000 {
    sizeState = sizeState &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    held.append(try SecureBytes(zeroed: 200 + Int(sizeState >> 33) % 3_900))
}
results.arena100kMaps = mappingCount()
results.arena100kMiB = Double(held.reduce(0) { $0 + $1.count }) / 1_048_576
results.arena100kRegions = SecureBytes.arenaRegions
held.removeAll()

results.samples = samples
results.quick = quick
let encoder = JSONEncoder()
encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
let json = try encoder.encode(results)
FileHandle.standardOutput.write(json)
FileHandle.standardOutput.write(Data("\n".utf8))
