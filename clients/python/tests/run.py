"""Runs the client's unittest suite and writes "PASSED FAILED" to a file.

Usage: python3 tests/run.py RESULT_FILE [PATTERN]
Failed counts failures, errors (of set-ups too) and unexpected successes.
Exits 0 only when nothing failed.
"""

import os
import sys
import unittest


def main() -> int:
    result_file = sys.argv[1]
    pattern = sys.argv[2] if len(sys.argv) > 2 else "test_*.py"
    here = os.path.dirname(os.path.abspath(__file__))
    suite = unittest.TestLoader().discover(here, pattern=pattern, top_level_dir=os.path.dirname(here))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    # A test with several failed subtests fails once; a failed set-up of a
    # class or module (not a test case, so not in testsRun) counts as one.
    bad = result.failures + result.errors
    failed_tests = {getattr(t, "test_case", t).id() for t, _ in bad if isinstance(t, unittest.TestCase)}
    setups = sum(1 for t, _ in bad if not isinstance(t, unittest.TestCase))
    failed = len(failed_tests) + setups + len(result.unexpectedSuccesses)
    passed = (result.testsRun - len(failed_tests) - len(result.skipped)
              - len(result.expectedFailures) - len(result.unexpectedSuccesses))
    with open(result_file, "w") as f:
        f.write(f"{max(passed, 0)} {failed}\n")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
