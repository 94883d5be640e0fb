// nqm explorer: the noisy quadratic model's closed forms and exact expected dynamics, computed in the page.
// The formulas are nqm's (nqm.theory, nqm.dynamics); tests/test_explorer.py holds the displayed numbers to them
// in a headless browser. No network, no library: plain JavaScript and SVG.
"use strict";

const DEFAULTS = {a: 1, d: 100, q: 1, s: 1, v0: 1, opt: "sgd", beta: 0.9, alpha: 0.5, B: 16, lr: 0.5, target: 0.1, T: 1000};
const STEP_BUDGET = 2e8; // coordinate-steps a search for the steps to the target may take (about a second)

// -- the problem: h, c, the initial variance (a power law, or a problem baked in by `nqm explore --problem`) --
function problemOf(st) {
  const baked = window.NQM_PROBLEM;
  if (baked) {
    return {h: Float64Array.from(baked.h), c: Float64Array.from(baked.c), v0: Float64Array.from(baked.init_var), name: baked.name};
  }
  const d = st.d, h = new Float64Array(d), c = new Float64Array(d), v0 = new Float64Array(d);
  for (let i = 0; i < d; i++) {
    h[i] = Math.pow(i + 1, -st.a); // h_i = i^(−a), h_max = 1
    c[i] = st.s * Math.pow(h[i], st.q); // Σ ∝ H^q: c_i = s·h_i^q
    v0[i] = st.v0;
  }
  return {h, c, v0, name: `h_i = i^−${st.a}, c = ${st.s}·h^${st.q}, d = ${d}`};
}

// the preconditioner's diagonal: P = H^(−α) for preconditioned SGD, I otherwise
function precondOf(P, st) {
  const p = new Float64Array(P.h.length);
  for (let i = 0; i < p.length; i++) p[i] = st.opt === "precond" ? Math.pow(P.h[i], -st.alpha) : 1;
  return p;
}

// -- the one-step law at θ with θ_i² = the initial variance (McCandlish et al. 2018, eqs. 2.5–2.9) --
function oneStep(P, p) {
  let gpg = 0, gphpg = 0, tr = 0, trSigma = 0, g2 = 0;
  for (let i = 0; i < P.h.length; i++) {
    const g = P.h[i] * Math.sqrt(P.v0[i]); // G = Hθ
    gpg += g * p[i] * g;
    gphpg += g * (p[i] * p[i] * P.h[i]) * g;
    tr += p[i] * p[i] * P.h[i] * P.c[i]; // tr(PHPΣ)
    trSigma += P.c[i];
    g2 += g * g;
  }
  return {
    gpg, gphpg, tr,
    bNoise: tr / gphpg, // B_noise = tr(PHPΣ)/GᵀPHPG
    bSimple: trSigma / g2, // B_simple = tr Σ/|G|²
    epsMax: gpg / gphpg, // ε_max = GᵀPG/GᵀPHPG
    dLmax: 0.5 * (gpg * gpg) / gphpg, // ΔL_max = ½(GᵀPG)²/GᵀPHPG
    epsOpt: (B) => gpg / (gphpg + tr / B), // ε_opt(B) = ε_max/(1 + B_noise/B)
    dLopt: (B) => 0.5 * (gpg * gpg) / (gphpg + tr / B), // ΔL_opt(B) = ΔL_max/(1 + B_noise/B)
    improvement: (e, B) => e * gpg - 0.5 * e * e * (gphpg + tr / B), // E[L(θ) − L(θ − εPĝ_B)]
  };
}

// -- exact expected dynamics (Zhang et al. 2019, §3): per coordinate, the second moments of a linear recurrence --
// SGD and preconditioned SGD: V' = (1 − εph)²V + ε²p²c/B. Heavy ball on positions, θ' = (1 + β − εh)θ − βθ₋ − σz
// with σ² = ε²c/B and θ₋₁ = θ₀: (u, w, v) = (E θ², E θθ₋, E θ₋²) → (A²u − 2Aβw + β²v + σ², Au − βw, u).
function dynamicsOf(P, p, st) {
  const d = P.h.length, heavy = st.opt === "heavy_ball", beta = heavy ? st.beta : 0;
  const A = new Float64Array(d), q = new Float64Array(d);
  for (let i = 0; i < d; i++) {
    const lam = st.lr * p[i] * P.h[i];
    A[i] = heavy ? 1 + beta - lam : 1 - lam;
    q[i] = (st.lr * p[i]) * (st.lr * p[i]) * P.c[i] / st.B;
  }
  const u = Float64Array.from(P.v0), w = Float64Array.from(P.v0), v = Float64Array.from(P.v0);
  let t = 0;
  const loss = () => {
    let s = 0;
    for (let i = 0; i < d; i++) s += P.h[i] * u[i];
    return 0.5 * s;
  };
  const step = () => {
    for (let i = 0; i < d; i++) {
      if (heavy) {
        const u1 = A[i] * A[i] * u[i] - 2 * A[i] * beta * w[i] + beta * beta * v[i] + q[i];
        w[i] = A[i] * u[i] - beta * w[i];
        v[i] = u[i];
        u[i] = u1;
      } else {
        u[i] = A[i] * A[i] * u[i] + q[i];
      }
    }
    t += 1;
  };
  const steady = () => { // the moment map's fixed point, inf where a coordinate is unstable
    let s = 0;
    for (let i = 0; i < d; i++) {
      let ui;
      if (heavy) {
        const stable = Math.abs(beta) < 1 && A[i] > -(1 + beta) && A[i] < 1 + beta;
        ui = stable ? q[i] / (1 - A[i] * A[i] - beta * beta + 2 * A[i] * A[i] * beta / (1 + beta)) : Infinity;
      } else {
        ui = Math.abs(A[i]) < 1 ? q[i] / (1 - A[i] * A[i]) : Infinity;
      }
      s += P.h[i] * ui;
    }
    return 0.5 * s;
  };
  return {loss, step, steady, time: () => t};
}

// E[L_t] at t = 0 … T
function lossCurve(P, p, st, T) {
  const dyn = dynamicsOf(P, p, st), out = new Float64Array(T + 1);
  out[0] = dyn.loss();
  for (let t = 1; t <= T; t++) { dyn.step(); out[t] = dyn.loss(); }
  return out;
}

// the first step t with E[L_t] ≤ target; Infinity where it stays above within the budget (cap says how far)
function stepsToTarget(P, p, st, target) {
  const dyn = dynamicsOf(P, p, st), cap = Math.max(1000, Math.floor(STEP_BUDGET / P.h.length));
  if (dyn.loss() <= target) return {steps: 0, cap};
  for (let t = 1; t <= cap; t++) {
    dyn.step();
    const L = dyn.loss();
    if (L <= target) return {steps: t, cap};
    if (!Number.isFinite(L)) break;
  }
  return {steps: Infinity, cap};
}

// -- the fewest steps at each B (McCandlish et al. 2018, §3): SGD (or preconditioned SGD) with ε tuned per B --
// The fewest steps over ε is the first t at which some ε reaches the target: S(B) = min{t : min_ε E[L_t](ε) ≤ target},
// with SGD's closed form per coordinate, V_t = a^t V₀ + q(1 − a^t)/(1 − a), a = (1 − εph)², q = ε²p²c/B.
function sgdLoss(P, p, eps, B, t) {
  let s = 0;
  for (let i = 0; i < P.h.length; i++) {
    const a = (1 - eps * p[i] * P.h[i]) * (1 - eps * p[i] * P.h[i]), q = (eps * p[i]) * (eps * p[i]) * P.c[i] / B;
    const at = Math.pow(a, t);
    s += P.h[i] * (at * P.v0[i] + (a === 1 ? t * q : q * (1 - at) / (1 - a)));
  }
  return 0.5 * s;
}
function bestLoss(P, p, B, t) { // min over ε of E[L_t] and its ε: a scan of log ε below the stable edge, then golden sections
  let top = 0;
  for (let i = 0; i < P.h.length; i++) top = Math.max(top, p[i] * P.h[i]);
  const hi = Math.log(2 / top * (1 - 1e-9)), lo = hi - Math.log(1e6), n = 64;
  const at = (u) => sgdLoss(P, p, Math.exp(u), B, t);
  let k0 = 0, f0 = Infinity;
  for (let k = 0; k < n; k++) {
    const f = at(lo + (hi - lo) * k / (n - 1));
    if (f < f0) { f0 = f; k0 = k; }
  }
  let a = lo + (hi - lo) * Math.max(0, k0 - 1) / (n - 1), b = lo + (hi - lo) * Math.min(n - 1, k0 + 1) / (n - 1);
  const r = (Math.sqrt(5) - 1) / 2;
  let c = b - r * (b - a), d = a + r * (b - a), fc = at(c), fd = at(d);
  for (let it = 0; it < 80 && b - a > 1e-12; it++) {
    if (fc <= fd) { b = d; d = c; fd = fc; c = b - r * (b - a); fc = at(c); }
    else { a = c; c = d; fc = fd; d = a + r * (b - a); fd = at(d); }
  }
  const best = [[f0, lo + (hi - lo) * k0 / (n - 1)], [fc, c], [fd, d]].sort((x, y) => x[0] - y[0])[0];
  return {loss: best[0], lr: Math.exp(best[1])};
}
function tunedSteps(P, p, B, target) { // doubling, then bisection on t (min_ε E[L_t] falls with t); and its ε
  if (sgdLoss(P, p, 1e-300, B, 0) <= target) return {steps: 0, lr: NaN};
  let hi = 1, found = bestLoss(P, p, B, 1);
  while (found.loss > target) { hi *= 2; if (hi > 1e8) return {steps: Infinity, lr: NaN}; found = bestLoss(P, p, B, hi); }
  let lo = hi / 2;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2), at = bestLoss(P, p, B, mid);
    if (at.loss <= target) { hi = mid; found = at; } else lo = mid;
  }
  return {steps: hi === 1 ? 1 : hi, lr: found.lr};
}
// McCandlish et al.'s frontier S = S_min + E_min/B fitted on log S, as nqm.dynamics.fit_frontier: for B_crit = e^u the
// best log S_min is the mean of log S − log(1 + e^u/B), so u minimises the spread of those residuals (a scan, then
// safeguarded Gauss–Newton); the edges E_min = 0 and S_min = 0 are closed forms.
function fitFrontier(bs, steps) {
  const logB = bs.map(Math.log), logS = steps.map(Math.log), n = bs.length;
  const soft = (x) => (x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x))); // log(1 + e^x)
  const mean = (v) => v.reduce((s, x) => s + x, 0) / v.length;
  const resid = (u) => logS.map((y, i) => y - soft(u - logB[i]));
  const spread = (u) => { const r = resid(u), m = mean(r); return r.reduce((s, x) => s + (x - m) * (x - m), 0); };
  const lo = Math.min(...logB) - 10, hi = Math.max(...logB) + 10, G = 241;
  let u = lo, f = Infinity;
  for (let k = 0; k < G; k++) { const uk = lo + (hi - lo) * k / (G - 1), fk = spread(uk); if (fk < f) { f = fk; u = uk; } }
  for (let it = 0; it < 60; it++) {
    const w = logB.map((lb) => 1 / (1 + Math.exp(lb - u))), r = resid(u), mr = mean(r), mw = mean(w);
    let num = 0, den = 0;
    for (let i = 0; i < n; i++) { num += (r[i] - mr) * (w[i] - mw); den += (w[i] - mw) * (w[i] - mw); }
    let delta = Math.max(-1, Math.min(1, num / Math.max(den, 1e-300)));
    for (let k = 0; k < 40; k++) { const ft = spread(u + delta); if (ft <= f) { u += delta; f = ft; break; } delta /= 2; if (k === 39) delta = 0; }
    if (!(Math.abs(delta) > 1e-12 * Math.max(1, Math.abs(u)))) break;
  }
  let sMin = Math.exp(mean(resid(u))), eMin = sMin * Math.exp(u);
  const ml = mean(logS), hr = logS.map((y, i) => y + logB[i]), mh = mean(hr);
  const flat = logS.reduce((s, y) => s + (y - ml) * (y - ml), 0), hyper = hr.reduce((s, y) => s + (y - mh) * (y - mh), 0);
  if (flat <= f * (1 + 1e-9) && flat <= hyper) { sMin = Math.exp(ml); eMin = 0; }
  else if (hyper <= f * (1 + 1e-9)) { sMin = 0; eMin = Math.exp(mh); }
  return {sMin, eMin, bCrit: eMin / sMin};
}

// -- state: the controls and the URL's hash hold the same values (a link reproduces a view) --
const FIELDS = ["a", "d", "q", "s", "v0", "opt", "beta", "alpha", "B", "lr", "target", "T"];
function readHash() {
  const st = {...DEFAULTS};
  for (const part of location.hash.replace(/^#/, "").split("&")) {
    const [k, v] = part.split("=");
    if (!FIELDS.includes(k) || v === undefined) continue;
    st[k] = k === "opt" ? decodeURIComponent(v) : Number(v);
  }
  return st;
}
function writeHash(st) {
  history.replaceState(null, "", "#" + FIELDS.map((k) => `${k}=${st[k]}`).join("&"));
}

// -- display --
function fmt(x) {
  if (x === Infinity) return "∞";
  if (!Number.isFinite(x)) return "—";
  const a = Math.abs(x);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? x.toExponential(3) : x.toPrecision(4);
}
function tickText(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(0).replace("e+", "e");
  return String(Number(v.toPrecision(3)));
}
function show(id, x, text) {
  const el = document.getElementById(id);
  el.dataset.value = String(x); // full precision, for the tests and for copying
  el.textContent = text === undefined ? fmt(x) : text;
}

const SVGNS = "http://www.w3.org/2000/svg";
function plot(svgId, series, opts) {
  // series: [{x: [...], y: [...], dash, width, label}], points: [{x, y, label}], vlines: [{x, label, dash}]
  const svg = document.getElementById(svgId), W = 460, H = 260, m = {l: 58, r: 12, t: 12, b: 40};
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  const tx = opts.xlog ? Math.log10 : (v) => v, ty = opts.ylog ? Math.log10 : (v) => v;
  const fin = (v) => Number.isFinite(v) && (!opts.xlog || v > 0);
  const xs = [], ys = [];
  for (const s of series) s.x.forEach((x, i) => { if (fin(x) && Number.isFinite(ty(s.y[i]))) { xs.push(tx(x)); ys.push(ty(s.y[i])); } });
  let [x0, x1] = opts.xrange ? opts.xrange.map(tx) : [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = opts.yrange ? opts.yrange.map(ty) : [Math.min(...ys), Math.max(...ys)];
  if (!(y1 > y0)) { y0 -= 1; y1 += 1; }
  if (!(x1 > x0)) { x0 -= 1; x1 += 1; }
  const pad = (y1 - y0) * 0.06; y0 -= pad; y1 += pad;
  const X = (v) => m.l + (tx(v) - x0) / (x1 - x0) * (W - m.l - m.r);
  const Y = (v) => H - m.b - (ty(v) - y0) / (y1 - y0) * (H - m.t - m.b);
  const el = (name, attrs, text) => {
    const e = document.createElementNS(SVGNS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  el("rect", {x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, class: "frame"});
  const ticks = (lo, hi, log) => { // in the axis's own units: decades on a log axis, 1–2–5 steps otherwise
    if (log) {
      const every = Math.max(1, Math.ceil((Math.floor(hi) - Math.ceil(lo) + 1) / 6)), out = [];
      for (let k = Math.ceil(lo); k <= Math.floor(hi); k += every) out.push(Math.pow(10, k));
      return out;
    }
    const raw = (hi - lo) / 5, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= raw);
    const out = [];
    for (let k = Math.ceil(lo / step); k * step <= hi; k++) out.push(Math.abs(k) < 1e-9 ? 0 : k * step);
    return out;
  };
  for (const v of ticks(x0, x1, opts.xlog)) el("text", {x: X(v), y: H - m.b + 14, class: "tick", "text-anchor": "middle"}, tickText(v));
  for (const v of ticks(y0, y1, opts.ylog)) el("text", {x: m.l - 4, y: Y(v) + 4, class: "tick", "text-anchor": "end"}, tickText(v));
  el("text", {x: (W + m.l) / 2, y: H - 6, class: "label", "text-anchor": "middle"}, opts.xlabel);
  el("text", {x: 12, y: (H - m.b) / 2, class: "label", transform: `rotate(-90 12 ${(H - m.b) / 2})`, "text-anchor": "middle"}, opts.ylabel);
  for (const s of series) {
    const pts = [];
    s.x.forEach((x, i) => { const y = s.y[i]; if (fin(x) && Number.isFinite(ty(y)) && ty(y) >= y0 && ty(y) <= y1) pts.push(`${X(x).toFixed(1)},${Y(y).toFixed(1)}`); });
    if (pts.length) el("polyline", {points: pts.join(" "), class: "line", "stroke-dasharray": s.dash || "none", "stroke-width": s.width || 2});
  }
  (opts.vlines || []).forEach((v, k) => { // labels on staggered rows, so that close lines stay readable
    if (!fin(v.x) || tx(v.x) < x0 || tx(v.x) > x1) return;
    el("line", {x1: X(v.x), x2: X(v.x), y1: m.t, y2: H - m.b, class: "vline", "stroke-dasharray": v.dash || "4 3"});
    el("text", {x: X(v.x) + 3, y: H - m.b - 6 - 13 * k, class: "note"}, v.label);
  });
  for (const v of opts.hlines || []) {
    if (!Number.isFinite(ty(v.y)) || ty(v.y) < y0 || ty(v.y) > y1) continue;
    el("line", {x1: m.l, x2: W - m.r, y1: Y(v.y), y2: Y(v.y), class: "vline", "stroke-dasharray": v.dash || "4 3"});
    el("text", {x: W - m.r - 3, y: Y(v.y) - 4, class: "note", "text-anchor": "end"}, v.label);
  }
  for (const p of opts.points || []) {
    if (!fin(p.x) || !Number.isFinite(ty(p.y))) continue;
    el("circle", {cx: X(p.x), cy: Y(p.y), r: 5, class: p.hollow ? "point hollow" : "point"});
    if (p.label) el("text", {x: X(p.x) + 7, y: Y(p.y) - 7, class: "note"}, p.label);
  }
  const back = (px) => x0 + (px - m.l) / (W - m.l - m.r) * (x1 - x0);
  return {x0, x1, X, invX: (px) => (opts.xlog ? Math.pow(10, back(px)) : back(px)), W};
}

function geom(lo, hi, n) {
  const out = []; for (let k = 0; k < n; k++) out.push(lo * Math.pow(hi / lo, k / (n - 1))); return out;
}

// -- one render: every view from the state --
let current = null;
function render(st) {
  current = st;
  const P = problemOf(st), p = precondOf(P, st), law = oneStep(P, p);
  const L0 = 0.5 * P.h.reduce((s, h, i) => s + h * P.v0[i], 0);
  const target = st.target * L0;
  show("out-problem", 0, P.name);
  show("out-bnoise", law.bNoise);
  show("out-bsimple", law.bSimple);
  show("out-epsmax", law.epsMax);
  show("out-dlmax", law.dLmax);
  show("out-epsopt", law.epsOpt(st.B));
  show("out-dlopt", law.dLopt(st.B));
  show("out-improvement", law.improvement(st.lr, st.B));
  show("out-loss0", L0);
  show("out-target", target);

  // view 1: the one-step parabola at B
  const eo = law.epsOpt(st.B), es = Array.from({length: 121}, (_, k) => 2.2 * eo * k / 120);
  stepAxis = plot("view-parabola", [{x: es, y: es.map((e) => law.improvement(e, st.B))}], {
    xlabel: "step ε", ylabel: "E[improvement] of one step",
    vlines: [{x: law.epsMax, label: "ε_max"}, {x: eo, label: "ε_opt(B)", dash: "2 2"}],
    hlines: [{y: 0, label: "", dash: "1 3"}],
    points: [{x: eo, y: law.dLopt(st.B), label: "ΔL_opt"}, {x: st.lr, y: law.improvement(st.lr, st.B), label: "your ε", hollow: true}],
  });

  // view 2: ε_opt(B)/ε_max = ΔL_opt(B)/ΔL_max = 1/(1 + B_noise/B) against B
  const lo = Math.max(1e-2, Math.min(st.B, law.bNoise, law.bSimple) / 100), hi = Math.max(st.B, law.bNoise, law.bSimple) * 100;
  const bs = geom(lo, hi, 160);
  const ratio = (b) => 1 / (1 + law.bNoise / b);
  const v2 = plot("view-batch", [{x: bs, y: bs.map(ratio)}], {
    xlog: true, xlabel: "batch size B", ylabel: "ε_opt/ε_max = ΔL_opt/ΔL_max", yrange: [0, 1],
    vlines: [{x: law.bNoise, label: "B_noise"}, {x: law.bSimple, label: "B_simple", dash: "2 2"}],
    points: [{x: st.B, y: ratio(st.B), label: "B"}],
  });
  batchAxis = v2;

  // view 3: the exact E[L_t] for (optimiser, ε, B), its steady state and the steps to the target
  const curve = lossCurve(P, p, st, st.T);
  const steady = dynamicsOf(P, p, st).steady();
  const hit = stepsToTarget(P, p, st, target);
  show("out-loss-end", curve[st.T]);
  show("out-loss-half", curve[Math.floor(st.T / 2)]);
  show("out-steady", steady);
  show("out-steps", hit.steps, Number.isFinite(hit.steps) ? String(hit.steps) : `not within ${hit.cap} steps`);
  show("out-examples", hit.steps * st.B, Number.isFinite(hit.steps) ? fmt(hit.steps * st.B) : "—");
  const ts = [], ys = [];
  for (const t of new Set(geom(1, st.T, 200).map(Math.round))) { ts.push(t); ys.push(curve[t]); }
  plot("view-loss", [{x: ts, y: ys}], {
    xlog: true, ylog: true, xlabel: "step t", ylabel: "exact E[L_t]",
    hlines: [{y: steady, label: "steady state"}, {y: target, label: "target", dash: "2 2"}],
    vlines: Number.isFinite(hit.steps) && hit.steps >= 1 ? [{x: hit.steps, label: "steps to target"}] : [],
  });
  // view 4: steps against examples to the target over B, ε tuned per B (SGD's family; P for preconditioned SGD)
  // p is P's diagonal for preconditioned SGD and ones otherwise: heavy ball's frontier is SGD's
  const top = Math.pow(2, Math.min(20, Math.max(6, Math.ceil(Math.log2(100 * law.bNoise)))));
  const fb = [], fs = [], flr = [];
  for (let b = 1; b <= top; b *= 2) { const run = tunedSteps(P, p, b, target); fb.push(b); fs.push(run.steps); flr.push(run.lr); }
  const ok = fs.map((x, i) => (Number.isFinite(x) && x > 0 ? i : -1)).filter((i) => i >= 0);
  const fit = ok.length >= 2 ? fitFrontier(ok.map((i) => fb[i]), ok.map((i) => fs[i])) : {sMin: NaN, eMin: NaN, bCrit: NaN};
  show("out-smin", fit.sMin);
  show("out-emin", fit.eMin);
  show("out-bcrit", fit.bCrit);
  // Zhang et al. 2024's 20% rule from B₀ = 1: the smallest B with S(B)·B > 1.2·S(1), on the fitted hyperbola
  // (1.2 + 0.2·B_crit: S(B)·B/S(1) = (S_min B + E_min)/(S_min + E_min)) and on the grid of B
  show("out-b20", 1.2 + 0.2 * fit.eMin / fit.sMin);
  const over = fb.findIndex((b, i) => fs[i] * b > 1.2 * fs[0]);
  show("out-b20-grid", over < 0 ? NaN : fb[over], over < 0 ? `beyond ${fb[fb.length - 1]}` : String(fb[over]));
  show("out-frontier", 0, fb.map((b, i) => `${b}:${fs[i]}`).join(" "));
  document.getElementById("out-frontier").dataset.steps = fs.join(",");
  document.getElementById("out-frontier").dataset.lrs = flr.join(",");
  const curveS = geom(Math.max(fit.sMin, 1e-9) * 1.0001, Math.max(...ok.map((i) => fs[i])) * 2, 120);
  plot("view-frontier", [
    {x: ok.map((i) => fs[i]), y: ok.map((i) => fs[i] * fb[i])},
    {x: curveS, y: curveS.map((S) => fit.eMin / (1 - fit.sMin / S)), dash: "5 4", width: 1.5},
  ], {
    xlog: true, ylog: true, xlabel: "steps S to the target (ε tuned per B)", ylabel: "examples E = S·B",
    vlines: [{x: fit.sMin, label: "S_min"}], hlines: [{y: fit.eMin, label: "E_min"}],
    points: ok.map((i) => ({x: fs[i], y: fs[i] * fb[i], label: fb[i] === 1 || i === ok[ok.length - 1] ? `B = ${fb[i]}` : ""})),
  });
  writeHash(st);
  syncControls(st);
}

// -- controls --
let batchAxis = null, stepAxis = null;
function syncControls(st) {
  for (const k of FIELDS) {
    const input = document.getElementById("in-" + k);
    if (!input) continue;
    if (input.type === "range" && input.dataset.log) input.value = Math.log10(st[k]);
    else input.value = st[k];
    const label = document.getElementById("val-" + k);
    if (label) label.textContent = Number.isInteger(st[k]) ? String(st[k]) : fmt(st[k]);
  }
  for (const el of document.querySelectorAll("[data-for]")) el.hidden = el.dataset.for !== st.opt;
  document.getElementById("spectrum-controls").hidden = Boolean(window.NQM_PROBLEM);
}
function readControls() {
  const st = {...current};
  for (const k of FIELDS) {
    const input = document.getElementById("in-" + k);
    if (!input) continue;
    if (k === "opt") st[k] = input.value;
    else if (input.dataset.log) st[k] = Math.pow(10, Number(input.value));
    else st[k] = Number(input.value);
    if (k === "d" || k === "T") st[k] = Math.max(1, Math.round(st[k]));
  }
  return st;
}

// -- predict, then reveal --
const QUESTIONS = [
  {
    id: "q1", answer: "double",
    reveal: (st) => {
      const P = problemOf(st), law = oneStep(P, precondOf(P, st)), b = law.bNoise / 32;
      return `At B = ${fmt(b)} (B_noise/32), ε_opt = ${fmt(law.epsOpt(b))}; at 2B it is ${fmt(law.epsOpt(2 * b))}: ×${fmt(law.epsOpt(2 * b) / law.epsOpt(b))}. ` +
        "Far below B_noise the noise term tr(HΣ)/B dominates the curvature, so ε_opt ∝ B: the linear scaling rule.";
    },
  },
  {
    id: "q2", answer: "same",
    reveal: (st) => {
      const P = problemOf(st), law = oneStep(P, precondOf(P, st)), b = law.bNoise * 32;
      return `At B = ${fmt(b)} (32·B_noise), ε_opt = ${fmt(law.epsOpt(b))}; at 2B it is ${fmt(law.epsOpt(2 * b))}: ×${fmt(law.epsOpt(2 * b) / law.epsOpt(b))}. ` +
        "Far above B_noise the step is limited by curvature, not noise: a larger batch buys almost nothing per step.";
    },
  },
  {
    id: "q3", answer: "worse",
    reveal: (st) => {
      const P = problemOf(st), law = oneStep(P, precondOf(P, st)), e = 2.5 * law.epsOpt(st.B);
      return `At ε = 2.5·ε_opt(B) = ${fmt(e)} the expected improvement is ${fmt(law.improvement(e, st.B))}: below 0. ` +
        "The improvement is a parabola in ε with roots 0 and 2ε_opt(B): past 2ε_opt a step makes the loss worse on average.";
    },
  },
];

function setup() {
  window.addEventListener("error", (e) => { document.getElementById("errors").textContent += String(e.message) + "\n"; });
  for (const input of document.querySelectorAll("input, select")) {
    input.addEventListener("input", () => render(readControls()));
  }
  // press and drag: B on the noise-scale view, ε on the one-step view; every view follows
  const drag = (id, axis, set) => {
    const svg = document.getElementById(id);
    const move = (ev) => {
      const box = svg.getBoundingClientRect(), ax = axis();
      if (ax) render(set(ax.invX((ev.clientX - box.left) / box.width * ax.W)));
    };
    svg.addEventListener("pointerdown", (ev) => { svg.setPointerCapture(ev.pointerId); move(ev); });
    svg.addEventListener("pointermove", (ev) => { if (svg.hasPointerCapture(ev.pointerId)) move(ev); });
  };
  drag("view-batch", () => batchAxis, (b) => ({...current, B: Math.round(Math.max(1, b))}));
  drag("view-parabola", () => stepAxis, (e) => ({...current, lr: Math.max(1e-6, e)}));
  for (const q of QUESTIONS) {
    document.getElementById(q.id + "-check").addEventListener("click", () => {
      const chosen = document.querySelector(`input[name=${q.id}]:checked`);
      const out = document.getElementById(q.id + "-reveal");
      if (!chosen) { out.textContent = "Commit to an answer first."; return; }
      out.textContent = (chosen.value === q.answer ? "Right. " : "Not quite. ") + q.reveal(current);
    });
  }
  render(readHash());
  document.body.dataset.ready = "1";
}

document.addEventListener("DOMContentLoaded", setup);
