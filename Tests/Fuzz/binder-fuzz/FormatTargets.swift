import BinderFormat

/// Targets for the plaintext formats: documents' JSON, markdown front matter, timestamps.
enum FormatTargets {
    /// Input: any bytes as JSON. What parses must serialise to JSON that parses back equal.
    static func json(_ bytes: [UInt8]) {
        guard let value = try? JSONValue.parse(bytes) else { return }
        touchNumbers(value)
        let written = value.serializedBytes()
        guard let again = try? JSONValue.parse(written) else {
            check(false, "serialised JSON does not parse")
            return
        }
        check(again == value, "JSON round trip changed the value")
        check(again.serializedBytes() == written, "JSON serialisation is not stable")
    }

    private static func touchNumbers(_ value: JSONValue) {
        switch value {
        case .number: _ = value.intValue; _ = value.doubleValue
        case .array(let elements): elements.forEach(touchNumbers)
        case .object(let object): object.values.forEach(touchNumbers)
        default: break
        }
    }

    /// Input: a decrypted document's JSON. A document survives JSON and its markdown view:
    /// `parse(render(doc)) == doc`, children included.
    static func document(_ bytes: [UInt8]) {
        guard let document = try? MedicalDocument(plaintext: bytes) else { return }
        _ = document.validate()
        _ = document.modificationTime
        check((try? MedicalDocument(plaintext: document.serializedBytes())) == document, "document JSON round trip")
        checkMarkdownRoundTrip(document)
    }

    private static func checkMarkdownRoundTrip(_ document: MedicalDocument) {
        let file = FrontMatter.render(document)
        do {
            let parsed = try FrontMatter.parse(Array(file.utf8))
            check(parsed.metadata == document.metadata, "front matter round trip changed the metadata")
            check(Array(parsed.value.utf8) == Array(document.value.utf8), "front matter round trip changed the value")
        } catch {
            check(false, "rendered front matter does not parse: \(error)")
        }
        for child in document.children { checkMarkdownRoundTrip(child) }
    }

    /// Input: a markdown file as written through the mount. What parses renders back to a file
    /// that parses to the same metadata and value.
    static func frontMatter(_ bytes: [UInt8]) {
        guard let parsed = try? FrontMatter.parse(bytes) else { return }
        guard let metadata = parsed.metadata else {
            check(Array(parsed.value.utf8) == bytes, "a file without front matter is not all value")
            return
        }
        // What is saved is the document's JSON: it must read back.
        let saved = MedicalDocument(value: parsed.value, metadata: metadata).serializedBytes()
        check((try? JSONValue.parse(saved)) != nil, "metadata read from front matter is saved as JSON that does not parse")
        let file = FrontMatter.render(metadata: metadata, value: parsed.value)
        do {
            let again = try FrontMatter.parse(Array(file.utf8))
            check(again.metadata == metadata, "front matter render/parse changed the metadata")
            check(Array(again.value.utf8) == Array(parsed.value.utf8), "front matter render/parse changed the value")
        } catch {
            check(false, "re-rendered front matter does not parse: \(error)")
        }
    }

    /// Input: mode byte, then timestamp text (0) or 12 bytes of seconds and nanoseconds (1), as
    /// a file's times set through the mount. Whatever parses writes back to the same instant.
    static func timestamps(_ bytes: [UInt8]) {
        let (mode, rest) = split(bytes)
        if mode % 2 == 0 {
            guard let parsed = Timestamps.parse(String(decoding: rest, as: UTF8.self)) else { return }
            check((0..<1_000_000_000).contains(parsed.nanoseconds), "nanoseconds out of range")
            checkWritten(seconds: parsed.seconds, nanoseconds: parsed.nanoseconds)
        } else {
            guard rest.count >= 12 else { return }
            var seconds: Int64 = 0, nanoseconds: Int32 = 0
            for byte in rest[0..<8] { seconds = seconds << 8 | Int64(byte) }
            for byte in rest[8..<12] { nanoseconds = nanoseconds << 8 | Int32(byte) }
            checkWritten(seconds: seconds, nanoseconds: nanoseconds)
        }
    }

    private static func checkWritten(seconds: Int64, nanoseconds: Int32) {
        let text = Timestamps.string(seconds: seconds, nanoseconds: nanoseconds)
        guard (0..<1_000_000_000).contains(nanoseconds), seconds.magnitude <= Timestamps.maximumSeconds.magnitude else {
            check(Timestamps.parse(text) != nil, "written timestamp \(text) does not parse")
            return
        }
        let reread = Timestamps.parse(text)
        check(reread?.seconds == seconds && reread?.nanoseconds == nanoseconds / 1_000_000 * 1_000_000,
              "timestamp \(seconds).\(nanoseconds) written as \(text) reads back as \(String(describing: reread))")
    }
}

extension FormatTargets {
    /// Input: a doctor's QR payload (`binder open-share`). What parses holds to the flow's
    /// shapes, and the same fields written back as JSON parse to the same invitation.
    static func scanInvitation(_ bytes: [UInt8]) {
        guard let invitation = try? ScanInvitation(parsing: bytes) else { return }
        check(invitation.privateKeyHex.utf8.count == 64, "a key that is not 64 hex characters was taken")
        check(!invitation.repoId.contains("/") && !invitation.repoId.hasPrefix("."), "a repository id that is a path was taken")
        check(invitation.endpoint.hasPrefix("http://") || invitation.endpoint.hasPrefix("https://"), "an endpoint that is not http(s)")
        let written = JSONValue.object(["action": "scan_session", "ephemeralPrivkey": .string(invitation.privateKeyHex),
                                        "sessionToken": .string(invitation.sessionToken), "repoId": .string(invitation.repoId),
                                        "expiresAt": JSONValue(invitation.expiresAt), "endpoint": .string(invitation.endpoint)])
        guard let again = try? ScanInvitation(parsing: written.serializedBytes()) else {
            return check(false, "an invitation written back does not parse")
        }
        check(again.privateKeyHex == invitation.privateKeyHex && again.sessionToken == invitation.sessionToken
              && again.repoId == invitation.repoId && again.expiresAt == invitation.expiresAt && again.endpoint == invitation.endpoint,
              "an invitation written back parses to another")
    }
}
