"""The static import graph's cycles (grimp; function-level and type-only imports counted) do
not spread: each is inside one of the known ones below, which issue 48 is to remove.

Known, and why they are left: the App hands over to its runners (``app.main()``,
``@app.command``, ``app.spark``: the contract's three ignored imports) while cli and spark
import the App; Table's window factories (``table.tumbling()``...) build its subclasses; the
agent's run loops live beside Agent and take it; ``stream.tee()``/``combine()`` and the
fan-out's branches, which are Chainables."""

import grimp

KNOWN = [
    lambda m: m == "streamkit.app" or m.startswith(("streamkit.cli.", "streamkit.spark.")),
]


def cycles(graph: grimp.ImportGraph) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def test_cycles_stay_inside_the_known_ones():
    graph = grimp.build_graph("streamkit", include_external_packages=False, cache_dir=None)
    spread = [sorted(c) for c in cycles(graph) if not any(all(known(m) for m in c) for known in KNOWN)]
    assert spread == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.b", imported="p.c")
    assert cycles(graph) == [{"p.a", "p.b"}]
