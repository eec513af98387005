"""Types of the native module; see the `ctxpack` package for the overview."""

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__version__: str

#: A JSON document: Python objects, or its JSON text as `str` or `bytes` (the fast path).
Document = Union[bytes, bytearray, str, Mapping[str, Any]]
#: A list of items (evidence, memory): Python objects or JSON text.
Items = Union[bytes, bytearray, str, Sequence[Mapping[str, Any]]]
#: A path argument.
PathArg = Union[str, "os.PathLike[str]"]

class Error(Exception):
    """Every failure of ctxpack.

    `kind` is the stable name of the failure (`invalid_input`, `unreadable_input`,
    `budget_exhausted`, `signature_missing`, ...), `exit_code` the exit code the command
    line would have used, and `details` the JSON object `--json-errors` prints
    (`{"error": {"kind": ..., "message": ..., "exit_code": ..., ...}}`).
    """

    kind: str
    exit_code: int
    message: str
    details: Dict[str, Any]
    path: Optional[str]
    reason: Optional[str]

class CheckFailed(Error):
    """The pack has errors (exit code 1); `details["error"]["diagnostics"]` lists them."""

class Unreadable(Error):
    """A file is missing or unreadable, or a document does not parse (exit code 3)."""

class InvalidInput(Error):
    """An input, artifact or reference is well-formed but invalid (exit code 4).

    `path` names the offending member of an input, such as
    `request.context.user.age`, or is None when the failure is not about one member.
    """

class Refused(Error):
    """The pack refused, or the compile failed closed (exit code 5); `reason` says why."""

class Diagnostic:
    """One diagnostic of `check`, located in the source (lines and columns from 1)."""

    code: str
    severity: str
    message: str
    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    help: Optional[str]
    #: The primary span first, then secondary ones: dicts with `message`, `line`,
    #: `column`, `end_line`, `end_column`.
    spans: List[Dict[str, Any]]

class CompiledContext:
    """One compiled request: the `ctxpack.compiled/v1` envelope and what a host acts on."""

    def to_json(self) -> bytes:
        """The canonical envelope: byte for byte what `ctxpack compile` prints."""
    @property
    def envelope(self) -> Dict[str, Any]:
        """The envelope as Python objects (built on first access, then shared)."""
    @property
    def must_refuse(self) -> bool:
        """Whether the host must refuse the request (`refusal_reason` says why)."""
    @property
    def refusal_reason(self) -> Optional[str]:
        """Why the pack refused, or None."""
    @property
    def must_escalate(self) -> bool:
        """Whether the host must escalate (to `controls["escalation_target"]`)."""
    @property
    def controls(self) -> Dict[str, Any]:
        """`runtime_controls`: refusal, escalation, approval gates, redactions."""
    @property
    def ledger_hash(self) -> str:
        """The audit ledger's replay hash (`context_ledger.hash`)."""
    def openai(self, *, model: Optional[str] = None) -> Dict[str, Any]:
        """The OpenAI Chat Completions request body; raises `Refused` when the pack refused."""
    def anthropic(self, *, model: Optional[str] = None, max_tokens: int = 1024) -> Dict[str, Any]:
        """The Anthropic Messages request body; raises `Refused` when the pack refused."""

class Pack:
    """A pinned, verified pack, prepared to compile many requests from many threads."""

    @staticmethod
    def load(path: PathArg) -> "Pack":
        """Loads an artifact file, verifying its hash and, under a trust policy, its signature."""
    @staticmethod
    def from_bytes(data: bytes, *, signature: Optional[str] = None) -> "Pack":
        """Loads an artifact from its bytes, verifying its hash (and signature under a trust policy)."""
    @staticmethod
    def from_registry(reference: str, *, registry: Optional[PathArg] = None) -> "Pack":
        """Loads `scope/name@version` from a registry directory."""
    @property
    def name(self) -> str:
        """The pack's name, `scope/name`."""
    @property
    def version(self) -> str:
        """The pack's version."""
    @property
    def hash(self) -> Optional[str]:
        """The artifact's `blake3:` hash."""
    def clear_cache(self) -> None:
        """Forgets every cached token count, content hash and decoded document, as for a pack loaded anew."""
    @property
    def cache_stats(self) -> Tuple[int, int]:
        """`(hits, misses)` of the token-count cache since the pack was loaded."""
    def compile(
        self,
        *,
        run: Document,
        request: Document,
        evidence: Optional[Items] = None,
        memory: Optional[Items] = None,
    ) -> CompiledContext:
        """Compiles one request; raises `InvalidInput` or `Refused` on failure.

        JSON `bytes` is the fastest input. Inputs sent again are not decoded again:
        the same `bytes`/`str` object as the last compile's request, evidence or
        memory is recognised by identity, and equal evidence or memory by its bytes."""

def check(
    source: str, *, path: str = "<string>", registry: Optional[PathArg] = None
) -> List[Diagnostic]:
    """Checks a pack's text and returns its diagnostics in source order."""

def build(path: PathArg, *, registry: Optional[PathArg] = None, locked: bool = False) -> bytes:
    """Builds the pack at `path` and returns the artifact's canonical bytes."""

def count_tokens(text: str, tokenizer: str = "o200k") -> int:
    """The number of tokens of `text` under `tokenizer` (`o200k`, `cl100k`, `approx`), as the compiler counts."""
