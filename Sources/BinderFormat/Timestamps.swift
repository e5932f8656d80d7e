import Foundation

/// Timestamps as the apps write them: JavaScript's `Date.prototype.toISOString()`,
/// `YYYY-MM-DDTHH:MM:SS.sssZ` in UTC.
///
/// Formatting and parsing are done by hand rather than with `DateFormatter` /
/// `ISO8601DateFormatter`: the output must match JavaScript exactly (always three
/// fraction digits), parsing must accept the variants older files contain, and the
/// functions are called from many FUSE threads, where pure functions need no locking.
public enum Timestamps {
    /// The current time, e.g. `2026-02-09T14:30:00.123Z`.
    public static func now() -> String {
        string(from: Date())
    }

    /// The range of a JavaScript `Date` (±8.64e15 ms, about ±273,790 years). Times beyond
    /// it (a file's time can be set to any 64-bit value) are written as its ends.
    public static let maximumSeconds: Int64 = 8_640_000_000_000

    /// A date as `toISOString()` writes it (milliseconds truncated, as JavaScript dates
    /// only hold milliseconds).
    public static func string(from date: Date) -> String {
        let limit = Double(maximumSeconds * 1000)
        let exact = (date.timeIntervalSince1970 * 1000).rounded(.down)
        let milliseconds = Int64(exact.isNaN ? 0 : min(max(exact, -limit), limit))
        let seconds = milliseconds.floorDivided(by: 1000)
        return string(seconds: seconds, nanoseconds: Int32(milliseconds - seconds * 1000) * 1_000_000)
    }

    /// Seconds (and nanoseconds, truncated to milliseconds) since the Unix epoch in
    /// `toISOString()` form. Years 0000–9999 are written with four digits, others as
    /// JavaScript does (`+010000`, `-000001`); times are clamped to `maximumSeconds` and
    /// nanoseconds to 0...999,999,999.
    public static func string(seconds: Int64, nanoseconds: Int32 = 0) -> String {
        let seconds = min(max(seconds, -maximumSeconds), maximumSeconds)
        let days = seconds.floorDivided(by: 86_400)
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civilDate(fromDays: days)
        let millisecond = Int(min(max(nanoseconds, 0), 999_999_999) / 1_000_000)
        let yearText = (0...9999).contains(year) ? pad(year, 4) : (year < 0 ? "-" : "+") + pad(abs(year), 6)
        return yearText + "-" + pad(month, 2) + "-" + pad(day, 2)
            + "T" + pad(Int(secondOfDay / 3600), 2) + ":" + pad(Int(secondOfDay % 3600 / 60), 2)
            + ":" + pad(Int(secondOfDay % 60), 2) + "." + pad(millisecond, 3) + "Z"
    }

    /// Parses an ISO 8601 timestamp into seconds and nanoseconds since the Unix epoch.
    ///
    /// Accepts `YYYY-MM-DDTHH:MM:SS.sssZ` and its variants found in binders: any number
    /// of fraction digits or none, seconds omitted (`HH:MM`), `Z` or an offset (`+02:00`,
    /// `+0200`, `+02`), `t`/`z` in lowercase or a space instead of `T`, and a bare date
    /// (`2020-05-15`, written by imports), read as midnight UTC. A date-time without an
    /// offset is read as UTC (not local time, as JavaScript would) so that the same file
    /// shows the same time on every machine. Years outside 0000–9999 are read in
    /// JavaScript's six-digit form (`+010000`, `-000001`; not `-000000`). Returns nil for
    /// anything else, including out-of-range fields.
    public static func parse(_ text: String) -> (seconds: Int64, nanoseconds: Int32)? {
        var scanner = DigitScanner(Array(text.utf8))
        guard let year = scanner.year(), scanner.skip("-"),
              let month = scanner.number(digits: 2), scanner.skip("-"),
              let day = scanner.number(digits: 2),
              (1...12).contains(month), (1...daysInMonth(year: year, month: month)).contains(day) else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        if scanner.atEnd { return (days * 86_400, 0) }

        guard scanner.skip("T") || scanner.skip("t") || scanner.skip(" "),
              let hour = scanner.number(digits: 2), scanner.skip(":"),
              let minute = scanner.number(digits: 2),
              hour < 24, minute < 60 else { return nil }
        var second = 0
        var nanoseconds: Int32 = 0
        if scanner.skip(":") {
            guard let value = scanner.number(digits: 2), value < 60 else { return nil }
            second = value
            if scanner.skip(".") || scanner.skip(",") {
                guard let fraction = scanner.fractionNanoseconds() else { return nil }
                nanoseconds = fraction
            }
        }

        var offsetSeconds = 0
        if scanner.skip("Z") || scanner.skip("z") {
            // UTC
        } else if !scanner.atEnd {
            guard let sign = scanner.sign(), let offsetHours = scanner.number(digits: 2), offsetHours < 24 else { return nil }
            var offsetMinutes = 0
            if !scanner.atEnd {
                _ = scanner.skip(":")
                guard let value = scanner.number(digits: 2), value < 60 else { return nil }
                offsetMinutes = value
            }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        }
        guard scanner.atEnd else { return nil }
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second - offsetSeconds)
        return (seconds, nanoseconds)
    }

    // MARK: Calendar arithmetic (proleptic Gregorian, after Howard Hinnant's algorithms)

    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = y.floorDivided(by: 400)
        let yearOfEra = y - era * 400
        let shiftedMonth = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilDate(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = z.floorDivided(by: 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2:
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
            return leap ? 29 : 28
        case 4, 6, 9, 11:
            return 30
        default:
            return 31
        }
    }

    /// A calendar day as `YYYY-MM-DD`, or nil when there is no such day (a year outside
    /// 0000–9999, a 13th month, the 30th of February): imported dates pass through here so
    /// a record's `created` is always a day the format can hold.
    public static func day(year: Int, month: Int, day: Int) -> String? {
        guard (0...9999).contains(year), (1...12).contains(month),
              (1...daysInMonth(year: year, month: month)).contains(day) else { return nil }
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}

/// A cursor over ASCII timestamp text.
private struct DigitScanner {
    let bytes: [UInt8]
    var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { position == bytes.count }

    mutating func skip(_ character: Unicode.Scalar) -> Bool {
        guard position < bytes.count, bytes[position] == UInt8(ascii: character) else { return false }
        position += 1
        return true
    }

    /// Exactly `digits` decimal digits.
    mutating func number(digits: Int) -> Int? {
        guard position + digits <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[position..<position + digits] {
            guard (0x30...0x39).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        position += digits
        return value
    }

    /// One or more fraction digits as nanoseconds (digits past the ninth are ignored).
    mutating func fractionNanoseconds() -> Int32? {
        var value: Int32 = 0
        var count = 0
        while position < bytes.count, (0x30...0x39).contains(bytes[position]) {
            if count < 9 { value = value * 10 + Int32(bytes[position] - 0x30) }
            count += 1
            position += 1
        }
        guard count > 0 else { return nil }
        for _ in count..<max(count, 9) { value *= 10 }
        return value
    }

    /// Four digits, or a sign and six digits.
    mutating func year() -> Int? {
        guard let sign = sign() else { return number(digits: 4) }
        guard let value = number(digits: 6), sign > 0 || value > 0 else { return nil }
        return sign * value
    }

    mutating func sign() -> Int? {
        if skip("+") { return 1 }
        if skip("-") { return -1 }
        return nil
    }
}

extension Int64 {
    /// Division rounding toward negative infinity (dates before 1970 have negative seconds).
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
