"""End-to-end tests that run against both layouts of the database."""

def e2e_test(name, srcs, deps, size = "medium", tags = [], data = [], **kwargs):
    """An end-to-end test, twice: on plain tables and on hash partitions.

    The test's code is compiled once, as a library, and linked into two
    tests: `name`, on plain tables, and `name_partitioned`, where every
    server the test starts and every database it migrates lays the
    per-conversation tables out as 4 hash partitions
    (CONVSTATE_TEST_HASH_PARTITIONS, read by tests/pg_harness).
    """
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        deps = deps,
        alwayslink = True,
    )
    native.cc_test(
        name = name,
        size = size,
        tags = tags,
        data = data,
        deps = [":" + name + "_lib"],
        **kwargs
    )
    native.cc_test(
        name = name + "_partitioned",
        size = size,
        tags = tags + ["partitioned"],
        data = data,
        env = {"CONVSTATE_TEST_HASH_PARTITIONS": "4"},
        deps = [":" + name + "_lib"],
        **kwargs
    )
