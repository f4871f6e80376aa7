"""Compiles a text file into a C++ library as `extern const char symbol[]`."""

def embed_text(name, src, symbol, visibility = None):
    """Library `name` defines `const char <symbol>[]` holding `src`."""
    native.genrule(
        name = name + "_cc",
        srcs = [src],
        outs = [name + ".cc"],
        cmd = ("if grep -q ')convstate_embed\"' $<; then echo 'delimiter in $<' >&2; exit 1; fi; " +
               "(echo 'extern const char {s}[];'; " +
               "echo 'const char {s}[] = R\"convstate_embed('; cat $<; " +
               "echo ')convstate_embed\";') > $@").format(s = symbol),
    )
    native.cc_library(
        name = name,
        srcs = [name + ".cc"],
        visibility = visibility,
    )
