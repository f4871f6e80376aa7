"""Compiles .proto files with the system protoc and gRPC plugin."""

def cc_grpc_proto_library(name, srcs, proto_root, visibility = None, grpc = True):
    """C++ messages (and gRPC stubs if grpc) for srcs, rooted at proto_root.

    Generated headers are included as "<path below proto_root>.pb.h".
    """
    rel = [s[len(proto_root) + 1:] if proto_root and s.startswith(proto_root + "/") else s for s in srcs]
    stems = [r[:-len(".proto")] for r in rel]
    outs = []
    for s in stems:
        outs += [s + ".pb.h", s + ".pb.cc"]
        if grpc:
            outs += [s + ".grpc.pb.h", s + ".grpc.pb.cc"]
    # Sources and outputs of a package in an external repository (such as
    # @third_party_protos) live under external/<name>/.
    repo = native.repository_name()
    parts = ([] if repo == "@" else ["external", repo[1:]]) + ([native.package_name()] if native.package_name() else [])
    src_dir = "/".join(parts) or "."
    out_dir = "/".join(["$(GENDIR)"] + parts)
    grpc_flags = ""
    if grpc:
        grpc_flags = "--grpc_out=%s --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin " % out_dir
    native.genrule(
        name = name + "_gen",
        srcs = srcs,
        outs = outs,
        cmd = ("/usr/bin/protoc -I/usr/include -I%s --cpp_out=%s %s $(SRCS)" %
               (src_dir, out_dir, grpc_flags)),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        visibility = visibility,
        deps = ["@system//:grpc"] if grpc else ["@system//:protobuf"],
    )
