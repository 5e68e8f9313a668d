"""The claims catalogue, rendered from the claim objects at build time so it cannot drift from the code.

``{claims-catalogue}`` (a directive, in docs/claims.md) renders :func:`theory.claims.all_claims`:
an overview table, then per claim its paper and reference, statement, assumptions, verdict rule, the
planted violations it must reject and the properties that check it.  :func:`render_claims` is the pure
part (Markdown text from any list of objects with the claim attributes), tested on a fake list in
``properties/suite/test_docs.py``.
"""
from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render_claims(claims) -> str:
    """Markdown for the catalogue: an overview table and one section per claim."""
    claims = list(claims)
    if not claims:
        raise ValueError("no claims to render")
    out = ["| claim | paper | reference | verdict rule |", "|---|---|---|---|"]
    for c in claims:
        out.append(f"| [`{c.name}`](#{anchor(c.name)}) | {_cell(c.paper.split(',')[0])} et al. | "
                   f"{_cell(c.reference)} | {_cell(c.rule)} |")
    for c in claims:
        out += ["", f"({anchor(c.name)})=", f"## `{c.name}`: {c.reference}", "", f"*{_cell(c.paper)}*", "",
                _cell(c.statement), ""]
        out.append("**Assumptions** (a problem that breaks one gets *not applicable*, naming it):")
        out.append("")
        out += [f"- **{_cell(a.name)}**: {_cell(a.statement)}" for a in c.assumptions] or ["- none"]
        pairs = getattr(getattr(c, "domain", None), "pairs", lambda: ())()
        if pairs:
            out += ["", "**Stated domain** (loss, head) -- what `strategies.problems_for` draws: "
                    + ", ".join(f"{loss}/{head}" for loss, head in pairs)]
        out += ["", f"**Verdict rule**: {_cell(c.rule)}", "", "**Planted violations it must reject**:", ""]
        out += [f"- {_cell(x)}" for x in c.calibrations] or ["- none"]
        out += ["", "**Checked by**: " + ", ".join(f"`{_cell(p)}`" for p in c.properties), ""]
    return "\n".join(out) + "\n"


def anchor(name: str) -> str:
    return "claim-" + name.replace(".", "-").replace("_", "-").lower()


class ClaimsCatalogue(SphinxDirective):
    has_content = False

    def run(self):
        from theory.claims import all_claims

        container = nodes.container(classes=["claims-catalogue"])
        text = render_claims(all_claims())
        self.state.nested_parse(StringList(text.splitlines(), source="theory.claims.all_claims()"),
                                self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("claims-catalogue", ClaimsCatalogue)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
