"""A small HCL scanner for the Terraform tests: enough to read blocks,
attributes and IAM policy statements out of terraform fmt'ed files.

Not a parser of HCL in general: it skips strings (with nested template
interpolations), comments and bracket groups, and returns expressions as
text. The Terraform files under terraform/ are written to be read this way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.paths import REPO

__all__ = [
    "MODULE",
    "TF_ROOT",
    "Statement",
    "actions",
    "attr",
    "blocks",
    "config_dirs",
    "policy",
    "statements",
    "strings",
    "top_level",
    "with_action",
]

TF_ROOT = REPO / "terraform"
MODULE = TF_ROOT / "modules" / "aws"


def config_dirs() -> list[str]:
    """Every module and example (a directory under modules/ or examples/
    with .tf files), relative to terraform/."""
    dirs = {
        p.parent.relative_to(TF_ROOT).as_posix()
        for top in ("modules", "examples")
        for p in (TF_ROOT / top).glob("*/*.tf")
    }
    return sorted(dirs)


def _end_of_string(text: str, i: int) -> int:
    """Index after the string opening at text[i] == '"' (templates nest)."""
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        elif text.startswith(("${", "%{"), i):
            i = _end_of_block(text, i + 1)
        else:
            i += 1
    raise ValueError("unterminated string")


def _end_of_block(text: str, i: int) -> int:
    """Index after the brace/bracket group opening at text[i]."""
    close = {"{": "}", "[": "]", "(": ")"}
    stack = [close[text[i]]]
    i += 1
    while stack:
        c = text[i]
        if c == '"':
            i = _end_of_string(text, i)
            continue
        if c == "#":
            i = text.index("\n", i)
        elif c in close:
            stack.append(close[c])
        elif c == stack[-1]:
            stack.pop()
        i += 1
    return i


def blocks(text: str, header: str) -> list[str]:
    """Bodies of the blocks whose header matches ``header`` (a regex up to,
    not including, the opening brace), at any depth."""
    out = []
    for m in re.finditer(header + r"\s*\{", text):
        start = m.end() - 1
        out.append(text[start + 1 : _end_of_block(text, start) - 1])
    return out


def top_level(body: str, header: str) -> list[str]:
    """Blocks of ``body`` matching ``header`` at its top level only."""
    found, i = [], 0
    pattern = re.compile(r"\s*(" + header + r")\s*\{")
    while i < len(body):
        m = pattern.match(body, i)
        if m:
            start = m.end() - 1
            end = _end_of_block(body, start)
            found.append(body[start + 1 : end - 1])
            i = end
        elif body[i] == '"':
            i = _end_of_string(body, i)
        elif body[i] == "#":
            i = body.find("\n", i) % (len(body) + 1) + 1
        elif body[i] in "{[(":
            i = _end_of_block(body, i)
        else:
            i += 1
    return found


def attr(body: str, name: str) -> str:
    """The expression assigned to ``name``: up to the end of its line, or of
    the brackets it opens there."""
    m = re.search(rf"^[ \t]*{name}[ \t]*=[ \t]*", body, re.M)
    assert m, f"no {name} in:\n{body}"
    i = m.end()
    while i < len(body) and body[i] != "\n":
        if body[i] == '"':
            i = _end_of_string(body, i)
        elif body[i] in "{[(":
            i = _end_of_block(body, i)
        elif body[i] == "#":
            break
        else:
            i += 1
    return body[m.end() : i].strip()


def strings(expr: str) -> list[str]:
    return re.findall(r'"([^"$]*)"', expr)


@dataclass(frozen=True)
class Statement:
    """One statement of an aws_iam_policy_document, as written in iam.tf."""

    sid: str
    actions: frozenset[str]
    resources: str  # the expression, as text
    conditions: tuple[tuple[str, str, str], ...]  # (test, variable, values expression)
    for_each: str | None  # a dynamic statement's for_each expression


def statements(doc: str) -> list[Statement]:
    stmts = []
    for body in top_level(doc, r'statement|dynamic\s+"statement"'):
        dynamic = top_level(body, "content")
        inner = dynamic[0] if dynamic else body
        conditions = tuple(
            (attr(c, "test").strip('"'), attr(c, "variable").strip('"'), attr(c, "values"))
            for c in top_level(inner, "condition")
        )
        stmts.append(
            Statement(
                sid=attr(inner, "sid").strip('"'),
                actions=frozenset(strings(attr(inner, "actions"))),
                resources=attr(inner, "resources"),
                conditions=conditions,
                for_each=attr(body, "for_each") if dynamic else None,
            )
        )
    return stmts


def policy(name: str) -> list[Statement]:
    (doc,) = blocks(
        (MODULE / "iam.tf").read_text(), rf'data\s+"aws_iam_policy_document"\s+"{name}"'
    )
    return statements(doc)


def actions(stmts: list[Statement]) -> set[str]:
    return {a for s in stmts for a in s.actions}


def with_action(stmts: list[Statement], action: str) -> list[Statement]:
    found = [s for s in stmts if action in s.actions]
    assert found, f"no statement grants {action}"
    return found
