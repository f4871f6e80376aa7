"""A libFuzzer target: built only on request (tag manual), with clang."""

def cc_fuzz_target(name, srcs, deps):
    native.cc_binary(
        name = name,
        srcs = srcs,
        deps = deps,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual", "fuzz"],
        testonly = True,
    )
