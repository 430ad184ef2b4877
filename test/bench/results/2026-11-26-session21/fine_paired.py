import sys, statistics as st, collections
rows = collections.defaultdict(dict)
for f in sys.argv[1:]:
    for l in open(f):
        p = l.split()
        if len(p) < 6: continue
        rows[(f, p[0])][p[1]] = list(map(float, p[3:6]))
for a in ("ours", "old"):
    rs = [[r[a][i] / r["mpich"][i] for i in range(3)] for r in rows.values() if a in r and "mpich" in r]
    rn = [[r["ours"][i] / r["old"][i] for i in range(3)] for r in rows.values() if "ours" in r and "old" in r]
    print("%-4s/mpich per round (n=%d): median 0B %.2f 8B %.2f 1K %.2f" % (a, len(rs), *[st.median(x[i] for x in rs) for i in range(3)]))
print("ours/old per round: median 0B %.2f 8B %.2f 1K %.2f" % tuple(st.median(x[i] for x in rn) for i in range(3)))
