# SPDX-License-Identifier: MIT
"""The count of the monitoring checks: one "ok"/"FAIL" line per check, "N passed, N failed" at the end."""
passed = 0
failed = 0


def result(ok, what, detail=""):
    """Counts and prints one check; @detail is printed under it, indented."""
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if detail:
        print("     " + detail.strip().replace("\n", "\n     "))


def finish():
    """Prints the count; the exit status (0 when nothing failed)."""
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
