#!/usr/bin/env python3
"""Write a wide, shallow elementwise graph in kiln's text format (issue 10, item 4).

    wide_graph.py NODES [--layers L] [--inputs I] [--n N] [--seed S] [-o FILE]

NODES elementwise nodes in L layers (default 5) of NODES / L each, over I inputs
x0..x{I-1}: f32[N] (default 32 and 4096), each first squared (h_i = mul(x_i, x_i): I more
nodes).  A node of the first layer is one of add, mul, sub, max of two of the h_i, no two
nodes alike (so the simplifier merges none; 32 inputs allow 2480 such nodes); a node of a
later layer is one of add, mul, sub, max of two nodes of the layer before, or tanh of one:
the first operand runs through a permutation of that layer, so every node is used, the
second is any node of it.  Every node of the last layer is an output.  There are no
constants, so eager mode's kernels are five distinct ones.  Values stay finite (at most
2^L in magnitude for inputs in [-1, 1]).  The same arguments always write the same graph
(Python's random with the seed).

The squares matter: the first layer reads values computed in a kernel, not inputs, so
the planner's clusters grow by joining an operand's kernel (every first-layer node reads
two of the 32 squares), as in a model whose wide part follows some elementwise
preprocessing, rather than starting one kernel per node.

`kiln bench` of the graph runs it; its compile column is the cold compile time.  See
docs/benchmarking.md, "Wide graphs".
"""
import argparse
import random
import sys

BINARY = ["add", "mul", "sub", "max"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nodes", type=int, help="elementwise nodes in all (a multiple of --layers)")
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--inputs", type=int, default=32)
    ap.add_argument("--n", type=int, default=4096, help="elements per tensor")
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("-o", "--output", help="file to write (default: standard output)")
    a = ap.parse_args()
    if a.layers < 1 or a.inputs < 1 or a.n < 1 or a.nodes < a.layers or a.nodes % a.layers:
        ap.error("NODES must be a positive multiple of --layers; --inputs and --n positive")
    width = a.nodes // a.layers
    rng = random.Random(a.seed)
    t = "f32[%d]" % a.n
    body = []
    prev = []
    # first layer: distinct (op, a, b); a < b for the commutative ops
    first = [(op, i, k) for op in BINARY for i in range(a.inputs) for k in range(a.inputs)
             if i != k and (op == "sub" or i < k)]
    if len(first) < width:
        ap.error("%d inputs make only %d distinct first-layer nodes; %d needed"
                 % (a.inputs, len(first), width))
    for i in range(a.inputs):
        body.append("  h%d = mul(x%d, x%d)" % (i, i, i))
    for j, (op, i, k) in enumerate(rng.sample(first, width)):
        v = "v0_%d" % j
        body.append("  %s = %s(h%d, h%d)" % (v, op, i, k))
        prev.append(v)
    for layer in range(1, a.layers):
        last = layer == a.layers - 1
        perm = prev[:]
        rng.shuffle(perm)
        cur = []
        for j in range(width):
            v = "y%d" % j if last else "v%d_%d" % (layer, j)
            op = rng.choice(BINARY + ["tanh"])
            if op == "tanh":
                body.append("  %s = tanh(%s)" % (v, perm[j]))
            else:
                body.append("  %s = %s(%s, %s)" % (v, op, perm[j], rng.choice(prev)))
            cur.append(v)
        prev = cur
    ins = ", ".join("x%d: %s" % (i, t) for i in range(a.inputs))
    outs = ", ".join("%s: %s" % (v, t) for v in prev)
    text = "# wide: %d elementwise nodes in %d layers of %d after %d squares, seed %d " \
           "(tests/bench/wide_graph.py)\n" % (a.nodes, a.layers, width, a.inputs, a.seed)
    text += "graph wide%d(%s) -> (%s) {\n%s\n}\n" % (a.nodes, ins, outs, "\n".join(body))
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
