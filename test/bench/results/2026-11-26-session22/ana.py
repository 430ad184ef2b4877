import sys, statistics as st, collections
rows = collections.defaultdict(dict); labs=[]
for f in sys.argv[1:]:
    for l in open(f):
        p = l.split()
        if len(p) < 6: continue
        rows[(f, p[0])][p[1]] = (float(p[2]), list(map(float, p[3:6])))
        if p[1] not in labs: labs.append(p[1])
ref = "mpich" if "mpich" in labs else labs[0]
for a in labs:
    rs = [[r[a][1][i] / r[ref][1][i] for i in range(3)] for r in rows.values() if a in r and ref in r]
    med = [st.median(r[a][1][i] for r in rows.values() if a in r) for i in range(3)]
    print("%-10s n=%d  abs med %.3f %.3f %.3f   /%s med %.3f %.3f %.3f" % (a, len(rs), *med, ref, *[st.median(x[i] for x in rs) for i in range(3)]))
fl=[r[labs[0]][0] for r in rows.values() if labs[0] in r]
print("floor ns: min %.0f med %.0f max %.0f" % (min(fl), st.median(fl), max(fl)))
