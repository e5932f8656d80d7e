// binder-demo-data REPOSITORY: fills a binder made by `binder create` with realistic demo
// records, written the way the Limbo Health apps write them. The owner's nsec is read from
// standard input (scripts/demo pipes it from `binder key export`). Demo data only.
import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: binder-demo-data REPOSITORY < nsec\n".utf8))
    exit(2)
}
do {
    let input = FileHandle.standardInput.readDataToEndOfFile()
    let key = try SecretKey(nsec: String(decoding: input, as: UTF8.self))
    let repository = try GitRepository.open(path: arguments[1])
    let writer = BinderWriter(repository: repository, key: try NIP44.ConversationKey(selfOf: key),
                              author: Signature(name: BinderCreator.defaultAuthor.name, email: BinderCreator.defaultAuthor.email))
    try DemoRecords.write(with: writer)
    print("Added demo records to \(arguments[1])")
} catch {
    FileHandle.standardError.write(Data("binder-demo-data: \(error)\n".utf8))
    exit(1)
}
