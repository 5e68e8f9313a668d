"""One table printer for the benchmarks: Markdown for RESULTS.md, or right-aligned columns for a terminal."""
from __future__ import annotations


def print_table(header, lines, markdown: bool) -> None:
    """Print ``header`` and the rows ``lines`` (lists of strings) as a Markdown table or aligned columns."""
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for line in lines:
            print("  ".join(x.rjust(w) for x, w in zip(line, widths)))
