import BinderSystem
import XCTest

final class HardeningTests: XCTestCase {
    func testProcessBecomesNonDumpable() throws {
        XCTAssertTrue(Hardening.makeNonDumpable())
        XCTAssertFalse(Hardening.isDumpable)
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        XCTAssertEqual(limit.rlim_cur, 0)
    }
}
