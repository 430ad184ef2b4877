import csv, sys, statistics as st, collections
# per-repetition ratios ours/mpich from FILE.raw.csv and FILE.host.csv; state: floor < 120 ns = sharing
base = sys.argv[1]
host = {(r['transport'], r['rep']): float(r['cacheline_ns']) for r in csv.DictReader(open(base + '.host.csv'))}
v = collections.defaultdict(dict)
for r in csv.DictReader(open(base + '.raw.csv')):
    v[(r['transport'], r['rep'], r['mode'], r['size'])][r['mpi']] = float(r['MBps'] if r['mode'] in ('bw',) else r['us'])
rat = collections.defaultdict(lambda: collections.defaultdict(list))
for (tr, rep, mode, size), d in v.items():
    if 'ours' not in d or 'mpich' not in d: continue
    ns = host.get((tr, rep), 0)
    state = 'sharing' if ns < 120 else 'apart'
    x = d['ours'] / d['mpich'] if mode != 'bw' else d['mpich'] / d['ours']
    rat[(tr, state)][(mode, int(size))].append(x)
for (tr, state), m in sorted(rat.items()):
    print(f"{tr} {state} (ours/MPICH time, bw inverted):")
    for (mode, size), xs in sorted(m.items()):
        print(f"  {mode:10s} {size:8d} n={len(xs)} median {st.median(xs):.2f} range {min(xs):.2f}-{max(xs):.2f}")
