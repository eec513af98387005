"""ctxpack for Python hosts: load a pinned pack once, compile a context per request.

    import ctxpack

    pack = ctxpack.Pack.load("target/ctxpack/acme/support-agent/1.4.0.json")
    cc = pack.compile(run=run, request=request, evidence=evidence, memory=memory)
    if cc.must_refuse:
        ...
    body = cc.openai(model="gpt-4o")

The compiler is the same code as the `ctxpack` command line: `cc.to_json()` is byte
for byte what `ctxpack compile` prints, and every failure raises an exception of the
`ctxpack.Error` hierarchy whose `exit_code` and `details` are what the command line's
exit code and `--json-errors` object would have been.
"""

from ._native import (
    CheckFailed,
    CompiledContext,
    Diagnostic,
    Error,
    InvalidInput,
    Pack,
    Refused,
    Unreadable,
    __version__,
    build,
    check,
    count_tokens,
)

__all__ = [
    "CheckFailed",
    "CompiledContext",
    "Diagnostic",
    "Error",
    "InvalidInput",
    "Pack",
    "Refused",
    "Unreadable",
    "__version__",
    "build",
    "check",
    "count_tokens",
]
