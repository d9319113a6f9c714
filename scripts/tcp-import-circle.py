#!/usr/bin/env python3
"""The tcp/ import circle (issue 24): the largest strongly connected component of the
import graph among the files of crates/lowtide/src/tcp.

  scripts/tcp-import-circle.py [DIR] [-v] [--max N]
      -v: each member's edges inside it; --max N: exit 1 if the circle has more than N
      files (crates/lowtide/tests/engine/layout.rs holds the bound)
  DROPE=sock>chrono,... scripts/tcp-import-circle.py   (what if those edges went)

Node = one .rs file (mod.rs included for the items it defines itself). Edge A->B when A's
non-test code names a path that resolves into B: `super::..`, `crate::tcp::..`, `self::..`
in use statements (braces expanded) and inline paths. Re-exports (`pub use x::Y`, any file)
resolve to the defining file; `mod x;` declarations are not edges."""
import os, re, sys
argv = sys.argv[1:]
bound = None
if '--max' in argv:
    i = argv.index('--max'); bound = int(argv[i + 1]); del argv[i:i + 2]
args = [a for a in argv if a != '-v']
root = args[0] if args else os.path.join(os.path.dirname(__file__), '..', 'crates/lowtide/src/tcp')
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)
            parts = rel[:-3].split('/')
            if parts[-1] == 'mod': parts = parts[:-1]
            files[tuple(['tcp'] + parts)] = p
def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    i = src.find('#[cfg(test)]')
    return src if i < 0 else src[:i]
code = {m: strip(open(p).read()) for m, p in files.items()}
def expand(s):
    s = s.strip()
    i = s.find('{')
    if i < 0: return [s]
    pre = s[:i]; depth = 0; items = []; cur = ''
    body = s[i+1:s.rfind('}')]
    for ch in body:
        if ch == '{': depth += 1
        if ch == '}': depth -= 1
        if ch == ',' and depth == 0: items.append(cur); cur = ''
        else: cur += ch
    items.append(cur)
    out = []
    for it in items:
        it = it.strip()
        if not it: continue
        for e in expand(it): out.append(pre + e if e != 'self' else pre.rstrip(':'))
    return out
# re-exports in each mod.rs: name -> module path
reexp = {}
for m, c in code.items():
    for u in re.findall(r'pub(?:\([a-z]+\))?\s+use\s+([^;]+);', c):
        for path in expand(u):
            segs = [x.split(' as ')[0].strip() for x in path.split('::')]
            if segs[0] in ('self',): segs = segs[1:]
            if len(segs) >= 2:
                reexp[(m, path.split(' as ')[-1].split('::')[-1].strip())] = segs
def resolve(mod, segs, depth=0):
    # mod: the file's module path; segs: path segments
    cur = list(mod)
    if segs[0] == 'crate':
        if len(segs) < 2 or segs[1] != 'tcp': return None
        cur = ['tcp']; segs = segs[2:]
    else:
        while segs and segs[0] in ('super', 'self'):
            if segs[0] == 'super': cur = cur[:-1]
            segs = segs[1:]
    if not cur or cur[0] != 'tcp': return None
    cur = tuple(cur)
    for s in segs:
        if cur + (s,) in files: cur = cur + (s,); continue
        if (cur, s) in reexp and depth < 8:
            # resolved from the re-exporting module, to the file that defines the item
            return resolve(cur, reexp[(cur, s)], depth + 1)
        break
    return cur
edges = {m: set() for m in files}
pat = re.compile(r'\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)')
for m, c in code.items():
    paths = []
    for u in re.findall(r'\buse\s+([^;]+);', c):
        paths += expand(u)
    c2 = re.sub(r'\buse\s+[^;]+;', '', c)
    paths += pat.findall(c2)
    for p in paths:
        segs = [x.split(' as ')[0].strip() for x in p.split('::') if x.strip()]
        if not segs or segs[0] not in ('crate', 'super', 'self'): continue
        t = resolve(m, segs)
        if t and t != m and t in files: edges[m].add(t)
for e in os.environ.get('DROPE','').split(','):
    if e:
        a,b=e.split('>'); edges[('tcp',)+tuple(a.split('/'))].discard(('tcp',)+tuple(b.split('/')))
# Tarjan
sys.setrecursionlimit(10000)
idx = {}; low = {}; st = []; on = set(); sccs = []; n = [0]
def sc(v):
    idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in files:
    if v not in idx: sc(v)
sccs.sort(key=len, reverse=True)
big = sccs[0]
print(f'files {len(files)}, edges {sum(len(e) for e in edges.values())}, largest SCC {len(big)}')
print(' '.join(sorted('/'.join(x[1:]) or 'mod' for x in big)))
if '-v' in sys.argv:
    for m in sorted(big):
        print('/'.join(m[1:]) or 'mod', '->', ' '.join(sorted('/'.join(x[1:]) or 'mod' for x in edges[m] if x in big)))
if bound is not None and len(big) > bound:
    print(f'the tcp/ import circle has {len(big)} files, more than {bound}: a type or constant '
          'that sock.rs (or another file the circle\'s members import) names lives in a file '
          'that imports back; move it where Linux\'s headers hold it (struct tcp_sock and its '
          'sub-structs: tcp/sock.rs; include/net/tcp.h constants: tcp/consts.rs); '
          'run with -v to see the edges', file=sys.stderr)
    sys.exit(1)
