import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    p = l.split()
    if len(p) < 6: continue
    d[p[1]].append((float(p[2]), list(map(float, p[3:6]))))
def q(xs, f):
    xs = sorted(xs); return xs[int(f * (len(xs) - 1))]
for state, sel in (("all", lambda c: True), ("floor<120ns", lambda c: c < 120), ("floor>=120ns", lambda c: c >= 120)):
    print(state)
    for mpi in ("ours", "old", "mpich"):
        rows = [v for c, v in d[mpi] if sel(c)]
        if not rows: continue
        print("  %-5s n=%2d " % (mpi, len(rows)) + "  ".join(
            "%s min %.3f p25 %.3f med %.3f" % (s, min(r[i] for r in rows), q([r[i] for r in rows], .25), st.median(r[i] for r in rows))
            for i, s in enumerate(("0B", "8B", "1K"))))
