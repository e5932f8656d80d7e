import BinderCrypto
import BinderSystem
import Glibc

/// Starting a daemon (`binder mount`, `binder open-share`): this binary again, detached, handed
/// its secret on a pipe, and waited for until it reports (`DaemonReport`). What its failure
/// says is the command's; a daemon that stopped without a word is named with its log.
enum DaemonLauncher {
    /// Spawns the daemon and returns once it serves at `mountpoint` (a first `stat` answered);
    /// throws the daemon's own reason when it could not start.
    static func start(_ role: String, arguments: [String], secret: SecureBytes, inherited: Int32? = nil,
                      mountpoint: String, logPath: String) throws -> DaemonProcess {
        let daemon: DaemonProcess
        do { daemon = try DaemonProcess.spawnSelf(arguments: arguments, secret: secret, inherited: inherited) } catch {
            throw CommandFailure("cannot start \(role): \(error)")
        }
        switch daemon.awaitReport() {
        case .ready?:
            // The daemon answers once its loop runs: a first stat, so the mount is usable.
            var info = stat()
            _ = stat(mountpoint, &info)
            return daemon
        case .failed(let reason)?:
            daemon.wait()
            throw CommandFailure(reason)
        case nil:
            daemon.wait()
            throw CommandFailure("\(role) stopped before the mount was ready; see \(logPath)")
        }
    }
}
