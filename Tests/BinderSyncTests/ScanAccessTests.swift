@testable import BinderServer
@testable import BinderSync
import BinderCrypto
import BinderGit
import Foundation
import Logging
import Testing

/// A share through the sync client against an in-process server: the patient opens a scan
/// session with `ServerClient`, the doctor clones with the scan token alone (`ScanAccess`,
/// `GitCarrier` with `ScanToken`), and once the patient revokes it the token opens nothing.
@Suite struct ScanAccessTests {
    @Test func aDoctorClonesWithTheScanTokenUntilThePatientRevokesIt() async throws {
        let patient = try SecretKey.generate()
        let server = try InProcessServer()
        try server.makeRepository("scan-visit", owner: patient.publicKey.hex)
        try server.makeRepository("records", owner: patient.publicKey.hex)
        let scratch = server.folder + "-doctor"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let logger = Logger(label: "sync-test") { _ in SwiftLogNoOpLogHandler() }
        try await server.serving { url in
            let (cloned, afterRevoke, elsewhere) = try await onThread { () -> (ObjectID?, SyncError?, SyncError?) in
                let client = try ServerClient(server: url, retry: ServerClientTests.quickRetry)
                let token = try client.login(secretKey: patient)
                let session = try client.openScanSession(token: token, repoId: "scan-visit", lifetime: 600)
                let access = try ScanAccess(endpoint: url, repoId: "scan-visit", sessionToken: session.sessionToken, logger: logger)
                let copy = try GitRepository.create(path: scratch + "/copy.git", bare: true)
                let cloned = try access.clone(into: copy)
                let wrongRepository = try ScanAccess(endpoint: url, repoId: "records", sessionToken: session.sessionToken, logger: logger)
                var elsewhere: SyncError?
                do { _ = try wrongRepository.fetch(copy) } catch { elsewhere = error as? SyncError }
                #expect(try client.revokeScanSession(token: token, sessionToken: session.sessionToken))
                var afterRevoke: SyncError?
                do { _ = try access.fetch(copy) } catch { afterRevoke = error as? SyncError }
                return (cloned, afterRevoke, elsewhere)
            }
            let stored = try await server.repositories.repository("scan-visit")
            #expect(stored == nil)   // revoked: the staging copy is gone with the session
            #expect(cloned != nil)
            guard case .forbidden? = elsewhere else { Issue.record("another repository: \(String(describing: elsewhere))"); return }
            guard case .forbidden? = afterRevoke else { Issue.record("after the revoke: \(String(describing: afterRevoke))"); return }
        }
    }
}
