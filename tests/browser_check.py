"""Check the built book in a real browser (headless Chromium): every page, both languages, three widths.

Usage (from the repository root, after `jupyter-book build .`):

    python tests/browser_check.py                          # _build/html, widths 1280 400 360, en and zh
    python tests/browser_check.py --html /tmp/b/_build/html --widths 360 --langs zh --pages 01_naive,intro
    python tests/browser_check.py --shots shots/ --shot-pages 01_naive,08_warp_tiling --json report.json

Needs `selenium` (pip install selenium; not a course requirement) and Chromium with its driver
(/usr/bin/chromium, /usr/bin/chromedriver by default; --chromium / --chromedriver to change). The
pages are served over a local HTTP server, so the stored language choice (localStorage) works.

For every page load it measures:
- weight (at the first width and language only): the page's own bytes (its HTML and anything only it
  loads; not what the search page fetches to show snippets of its hits) and the first-visit bytes (everything the page loads, the book's shared _static files too,
  which a browser then keeps in its cache for every other page); the shared files are listed once;
- horizontal overflow: the document wider than the viewport (the page pans sideways), with the
  widest elements that cause it;
- charts (plotly): a plot area smaller than 200 x 150 px, a visible modebar or a legend overlapping the
  title, a legend overlapping the x tick labels or axis title or running past the chart's bottom, title
  text running past the chart's right edge, chart text in the other language (in 中文 mode: an English
  title, axis title or legend entry of three words or more);
- other-language text: elements of class lang-en visible in 中文 mode (lang-zh in English mode);
  printed outputs (div.cell_output) with Chinese visible in English mode; outputs whose visible text
  is a Latin-only sentence in 中文 mode (a heuristic, reported as a count, not a defect);
- the header: the language switch and header buttons inside the viewport, not covering the title;
- kernel listings (code with `__global__`) that wrap their lines (white-space other than pre);
- dark mode (at the first width): function names in code with contrast under 3:1 to their background;
  (at every width and language) figure and table captions and the texts of charts (titles, annotations,
  axis titles and ticks, legends) under 4.5:1 to what they are drawn on, computed from computed colours;
- tables (at widths under 600 px): a table wider than the content column that does not scroll inside its
  own box;
- search (on search.html, at every width and language): the book's own search (Search._performSearch in the page)
  puts each level's page first for its title's words, English and Chinese, with and without "Level N:";
  and the first hit shown for ?q=warp+tiling is Level 8.

Exit status: 0 when no defect was found, 1 when some were (printed, and in --json), 2 on bad usage.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MAX_OWN_BYTES = 3_000_000
MIN_PLOT_W, MIN_PLOT_H = 200, 150

# Runs in the page; returns everything the checks need as one JSON-able object.
PROBE = r"""
const lang = document.documentElement.dataset.lang;
// The layout width: on an emulated phone innerWidth grows to whatever the page is zoomed out to fit, so a page
// wider than the phone would measure as fitting it.
const vw = document.documentElement.clientWidth;
const CJK = /[\u3400-\u9fff\uff00-\uffef]/;
function visible(el) {
  if (!el || !el.getClientRects().length) return false;
  const s = getComputedStyle(el);
  return s.visibility !== 'hidden' && s.display !== 'none' && parseFloat(s.opacity || '1') > 0.01;
}
function rect(el) { const r = el.getBoundingClientRect(); return {l: r.left, t: r.top, r: r.right, b: r.bottom, w: r.width, h: r.height}; }
function overlap(a, b) { return a && b && a.w > 0 && b.w > 0 && Math.min(a.r, b.r) - Math.max(a.l, b.l) > 2 && Math.min(a.b, b.b) - Math.max(a.t, b.t) > 2; }
function describe(el) {
  let s = el.tagName.toLowerCase();
  if (el.id) s += '#' + el.id;
  if (el.className && typeof el.className === 'string') s += '.' + el.className.trim().split(/\s+/).slice(0, 2).join('.');
  const t = (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 50);
  return t ? s + ' "' + t + '"' : s;
}
function clipped(el) {  // inside a box that scrolls or clips sideways: does not widen the page
  for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX;
    if (o === 'auto' || o === 'scroll' || o === 'hidden' || o === 'clip') return true;
  }
  return false;
}
const out = {lang, vw, scrollWidth: document.documentElement.scrollWidth, overflowers: [], charts: [],
             otherLang: [], outputsOtherLang: [], latinOutputs: [], header: [], wrappedListings: [], themeEnglish: []};
if (out.scrollWidth > vw + 1) {
  const seen = new Set();
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.right > vw + 1 && r.width > 0 && !clipped(el) && visible(el)) {
      const d = describe(el);
      if (!seen.has(d)) { seen.add(d); out.overflowers.push(d + ' right=' + Math.round(r.right)); }
      if (out.overflowers.length >= 5) break;
    }
  }
}
const other = lang === 'zh' ? '.lang-en' : '.lang-zh';
for (const el of document.querySelectorAll(other)) {
  if (visible(el) && (el.textContent || '').trim() && !el.parentElement.closest(other)) out.otherLang.push(describe(el));
}
for (const el of document.querySelectorAll('div.cell_output, div.output')) {
  if (el.parentElement.closest('div.cell_output, div.output') || el.querySelector('.gemm-figure')) continue;
  if (!visible(el)) continue;
  // the visible text only: drop the hidden language halves
  const c = el.cloneNode(true);
  const hide = [];
  el.querySelectorAll('*').forEach((e, i) => { if (!visible(e)) hide.push(i); });
  const all = c.querySelectorAll('*');
  hide.reverse().forEach(i => all[i] && all[i].remove());
  const text = (c.textContent || '').trim();
  if (!text) continue;
  if (lang === 'en' && CJK.test(text)) out.outputsOtherLang.push(text.replace(/\s+/g, ' ').slice(0, 80));
  if (lang === 'zh' && !CJK.test(text) && /[A-Za-z]{3,}(\s+[A-Za-z]{2,}){3,}/.test(text))
    out.latinOutputs.push(text.replace(/\s+/g, ' ').slice(0, 80));
}
const h1 = [...document.querySelectorAll('article h1, main h1')].find(visible);
const h1r = h1 ? rect(h1) : null;
for (const el of document.querySelectorAll('#lang-switch, .header-article-items__end > *, .header-article-items__start > *')) {
  if (!visible(el)) continue;
  const r = rect(el);
  if (r.r > vw + 1 || r.l < -1) out.header.push('off-screen: ' + describe(el));
  if (h1r && overlap(r, h1r)) out.header.push('covers the title: ' + describe(el));
}
for (const pre of document.querySelectorAll('pre')) {
  if (!visible(pre) || !/__global__/.test(pre.textContent || '')) continue;
  const ws = getComputedStyle(pre).whiteSpace;
  if (ws !== 'pre') out.wrappedListings.push(describe(pre) + ' white-space=' + ws);
}
for (const gd of document.querySelectorAll('.js-plotly-plot')) {
  const fl = gd._fullLayout;
  if (!fl || !visible(gd)) continue;
  const c = {id: gd.id, title: '', defects: [], plot: null};
  const titleEl = gd.querySelector('.g-gtitle .gtitle');
  const titleR = titleEl ? rect(titleEl) : null;
  c.title = titleEl ? titleEl.textContent.slice(0, 60) : '';
  const gr = rect(gd);
  let minW = Infinity, minH = Infinity;
  for (const k of Object.keys(fl._plots || {})) {
    const p = fl._plots[k];
    if (p.xaxis && p.yaxis) { minW = Math.min(minW, p.xaxis._length); minH = Math.min(minH, p.yaxis._length); }
  }
  if (minW !== Infinity) {
    c.plot = [Math.round(minW), Math.round(minH)];
    if (minW < MIN_W || minH < MIN_H) c.defects.push('plot area ' + c.plot.join('x') + ' px');
  }
  const mb = gd.querySelector('.modebar');
  if (mb && visible(mb) && titleR && overlap(rect(mb), titleR)) c.defects.push('modebar over the title');
  const legend = gd.querySelector('.legend');
  if (legend && titleR && overlap(rect(legend), titleR)) c.defects.push('legend over the title');
  if (legend && visible(legend)) {  // the legend clear of the x tick labels and axis titles, and inside the chart
    const lr = rect(legend.querySelector('.bg') || legend);
    const xs = [...gd.querySelectorAll('.xtick text, .infolayer text')].filter(t => t.textContent &&
      (t.closest('.xtick') || /^x\d*title$/.test(t.getAttribute('class') || '')));
    const hit = xs.find(t => overlap(rect(t), lr));
    if (hit) c.defects.push('legend over the x axis text "' + hit.textContent.slice(0, 30) + '"');
    if (lr.b > gr.b + 2) c.defects.push('legend runs ' + Math.round(lr.b - gr.b) + ' px past the chart\'s bottom');
  }
  for (const t of gd.querySelectorAll('.g-gtitle text, .annotation-text, .legendtext, .xtitle, .ytitle')) {
    const r = rect(t);
    if (r.w > 0 && (r.r > gr.r + 2 || r.l < gr.l - 2)) { c.defects.push('text past the edge: "' + t.textContent.slice(0, 40) + '"'); break; }
  }
  const texts = [...gd.querySelectorAll('.g-gtitle text, .xtitle, .ytitle, .legendtext, .annotation-text, .xtick text, .ytick text')]
    .map(t => t.textContent).filter(Boolean);
  if (lang === 'en') { const zh = texts.filter(t => CJK.test(t)); if (zh.length) c.defects.push('Chinese in English mode: "' + zh[0].slice(0, 40) + '"'); }
  if (lang === 'zh') {
    const head = [...gd.querySelectorAll('.g-gtitle text, .xtitle, .ytitle')].map(t => t.textContent)
      .filter(t => !CJK.test(t) && /[A-Za-z]{3,}(\s+[A-Za-z]{2,}){2,}/.test(t));
    if (head.length) c.defects.push('English title/axis in 中文 mode: "' + head[0].slice(0, 40) + '"');
    const names = [...gd.querySelectorAll('.legendtext')].map(t => t.textContent)
      .filter(t => !CJK.test(t) && /[A-Za-z]{3,}(\s+[A-Za-z]{2,}){2,}/.test(t));
    if (names.length) c.defects.push('English legend in 中文 mode: "' + names[0].slice(0, 40) + '"');
  }
  out.charts.push(c);
}
if (lang === 'zh') {  // the theme's own labels left in English
  const LATIN = /^[^\u3400-\u9fff]*[a-z]{3,}[^\u3400-\u9fff]*$/;
  const BRAND = /^(GitHub|Colab|Binder|JupyterHub|Live Code|\.ipynb|\.md|\.pdf|gemm-course)$/;
  const chrome = document.querySelectorAll('.bd-header-article, .bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, ' +
    '.prev-next-area, .bd-footer, .bd-footer-article, footer, details.hide > summary, .toggle-button, ' +
    'button.toggle-details, #search-results, .bd-search, .search-button-field, #pst-back-to-top, .sidebar-primary-items__start');
  const seen = new Set();
  for (const el of chrome) {
    const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    while (w.nextNode()) {
      const t = w.currentNode.nodeValue.trim(), p = w.currentNode.parentElement;
      if (!t || !LATIN.test(t) || BRAND.test(t) || !visible(p) || p.closest('.lang-en, .lang-zh, code, pre, #lang-switch, kbd')) continue;
      if (p.closest('#search-results') && p.closest('a, .context')) continue;  // the book's own search hits
      if (!seen.has(t)) { seen.add(t); out.themeEnglish.push(t.slice(0, 40)); }
    }
    for (const e of el.querySelectorAll('[title], [placeholder], [aria-label], [data-bs-title]')) {
      if (e.closest('#lang-switch')) continue;  // "Show the English text" on the English button is right
      for (const a of ['placeholder', 'title', 'data-bs-title']) {
        const v = (e.getAttribute(a) || '').trim();
        if (v && LATIN.test(v) && !BRAND.test(v) && !seen.has(v)) { seen.add(v); out.themeEnglish.push(a + '=' + v.slice(0, 40)); }
      }
    }
  }
}
return out;
""".replace("MIN_W", str(MIN_PLOT_W)).replace("MIN_H", str(MIN_PLOT_H))

WEIGHT = r"""
const nav = performance.getEntriesByType('navigation')[0];
const res = performance.getEntriesByType('resource').filter(e => e.initiatorType !== 'fetch' && e.initiatorType !== 'xmlhttprequest')
  .map(e => [e.name, e.decodedBodySize || e.encodedBodySize || 0]);  // (the search page fetches its hits' pages for snippets)
return {html: nav ? nav.decodedBodySize : 0, resources: res};
"""

DARK = r"""
function lum(c) {
  const m = c.match(/[\d.]+/g); if (!m) return null;
  const [r, g, b] = m.slice(0, 3).map(v => { v = v / 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
function bg(el) {
  for (let e = el; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (c && !/rgba\(.*,\s*0\)$/.test(c) && c !== 'transparent') return c;
  }
  return 'rgb(0,0,0)';
}
const bad = [];
for (const el of document.querySelectorAll('.highlight .nf, .highlight .nc, .highlight .nn, .highlight .n')) {
  if (!el.getClientRects().length) continue;
  const a = lum(getComputedStyle(el).color), b = lum(bg(el));
  if (a === null || b === null) continue;
  const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  if (ratio < 3) { bad.push(el.className + ' "' + el.textContent.slice(0, 30) + '" contrast ' + ratio.toFixed(2)); }
  if (bad.length >= 3) break;
}
return bad;
"""


CAPTIONS = r"""
function rgb(c) {  // any CSS colour -> [r, g, b, a]
  const probe = document.createElement('span');
  probe.style.color = c; document.body.appendChild(probe);
  const m = getComputedStyle(probe).color.match(/[\d.]+/g).map(Number); probe.remove();
  return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
}
function lum(c) {
  return 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  function lin(v) { v = v / 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }
}
function ratio(a, b) { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); }
function bg(el) {
  for (let e = el; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c[3] > 0.5) return c;
  }
  return rgb(getComputedStyle(document.body).backgroundColor);
}
function shown(el) {
  if (!el.getClientRects().length) return false;
  for (let e = el; e && e !== document.body; e = e.parentElement) {
    const s = getComputedStyle(e);
    if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) < 0.01) return false;
  }
  return true;
}
const out = {checked: 0, worst: null, low: []};
function note(what, r) {
  out.checked++;
  if (out.worst === null || r < out.worst) out.worst = r;
  if (r < 4.5 && out.low.length < 5) out.low.push(what + ' contrast ' + r.toFixed(2));
}
for (const el of document.querySelectorAll('.gemm-figure-caption, .gemm-caption, figcaption, .caption-text')) {
  if (!shown(el) || !el.textContent.trim()) continue;
  note('caption "' + el.textContent.trim().slice(0, 40) + '"', ratio(rgb(getComputedStyle(el).color), bg(el)));
}
for (const gd of document.querySelectorAll('.js-plotly-plot')) {
  const fl = gd._fullLayout;
  if (!fl || !shown(gd)) continue;
  let paper = rgb(fl.paper_bgcolor);
  if (paper[3] < 0.5) paper = bg(gd);
  for (const t of gd.querySelectorAll('.annotation-text, .g-gtitle text, .xtitle, .ytitle, .legendtext, .xtick text, .ytick text')) {
    if (!t.textContent.trim() || !t.getClientRects().length) continue;
    note('chart "' + (fl.title && fl.title.text || '').slice(0, 30) + '": "' + t.textContent.slice(0, 30) + '"',
         ratio(rgb(getComputedStyle(t).fill), paper));
  }
}
return out;
"""

TABLES = r"""
const column = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
const width = column.getBoundingClientRect().right;
const bad = [];
for (const t of document.querySelectorAll('article table')) {
  if (!t.getClientRects().length) continue;
  const r = t.getBoundingClientRect();
  if (r.right <= width + 1) continue;
  let scrolls = false;  // inside a box narrower than the table that scrolls sideways
  for (let p = t.parentElement; p && p !== column; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX;
    if ((o === 'auto' || o === 'scroll') && p.getBoundingClientRect().right <= width + 1) { scrolls = true; break; }
  }
  if (!scrolls) bad.push('table ' + Math.round(r.width) + ' px wide, content column ends at ' + Math.round(width) + ' px: "' +
                         (t.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 40) + '"');
}
return bad;
"""

# Runs the book's own search in search.html for each query (arguments[0]); returns the top hit's docname.
SEARCH = r"""
const queries = arguments[0], done = arguments[arguments.length - 1];
let tries = 0;
(function wait() {
  if (typeof Search === 'undefined' || !Search._index) { if (tries++ < 200) return setTimeout(wait, 50); return done(null); }
  const out = {};
  for (const q of queries) {
    const r = Search._performSearch(...Search._parseQuery(q));
    out[q] = r.length ? r[r.length - 1][0] + (r[r.length - 1][2] || '') : '';
  }
  done(out);
})();
"""


def _level_queries(html: Path) -> dict[str, str]:
    """Each level's title words (English and Chinese, with and without "Level N:") -> its page's docname."""
    import re

    text = (html / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    queries = {}
    for doc, title in zip(index["docnames"], index["titles"]):
        if re.fullmatch(r"notebooks/\d\d_\w+", doc):
            en, zh = re.sub(r"<[^>]+>", "", title).replace("&amp;", "&").split(" · ", 1)
            for q in (en, zh, re.sub(r"^Level \d+:\s*", "", en), re.sub(r"^第 \d+ 级：", "", zh)):
                queries[q] = doc
    return queries


def _pages(html: Path, only: list[str]) -> list[str]:
    pages = sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                   if not p.relative_to(html).as_posix().startswith(("_", "genindex")))
    if only:
        pages = [p for p in pages if any(o in p for o in only)]
    return pages


def _serve(html: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # the browser left a page before it was sent (a broken pipe): not the book's fault

    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(html)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def _driver(args: argparse.Namespace) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = args.chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--hide-scrollbars", "--window-size=1280,900", "--disable-extensions"):
        opts.add_argument(flag)
    drv = webdriver.Chrome(service=Service(args.chromedriver), options=opts)
    drv.set_page_load_timeout(60)
    drv.execute_cdp_cmd("Network.enable", {})
    drv.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})  # every load counts its bytes
    return drv


def _set_width(drv: Any, width: int) -> None:
    phone = width < 600
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 780 if phone else 900, "deviceScaleFactor": 1, "mobile": phone})


def _load(drv: Any, url: str, timeout: float) -> None:
    drv.get(url)
    end = time.time() + timeout
    while time.time() < end:  # every figure drawn (plotly adds .main-svg)
        done = drv.execute_script(
            "return document.readyState === 'complete' && [...document.querySelectorAll('.gemm-figure')]"
            ".every(d => d.querySelector('.main-svg'));")
        if done:
            break
        time.sleep(0.2)
    time.sleep(0.3)  # relabel / relayout after the language event


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--html", type=Path, default=REPO / "_build" / "html", help="the built book's html folder")
    ap.add_argument("--widths", default="1280,400,360", help="viewport widths in px, comma-separated")
    ap.add_argument("--langs", default="en,zh", help="languages: en, zh or both comma-separated")
    ap.add_argument("--pages", default="", help="only pages whose path contains one of these (comma-separated)")
    ap.add_argument("--shots", type=Path, default=None, help="folder for screenshots at the narrowest width")
    ap.add_argument("--shot-pages", default="01_naive,08_warp_tiling,13_fp8,intro",
                    help="pages to screenshot (path contains), comma-separated")
    ap.add_argument("--json", type=Path, default=None, help="write every finding to this file")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for a page's figures")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = ap.parse_args(argv)
    html = args.html.resolve()
    if not (html / "index.html").is_file():
        print(f"no built book at {html}: build it (jupyter-book build .) or pass --html", file=sys.stderr)
        return 2
    try:
        widths = [int(w) for w in args.widths.split(",") if w.strip()]
        langs = [lang.strip() for lang in args.langs.split(",") if lang.strip()]
        assert widths and all(w > 0 for w in widths) and langs and set(langs) <= {"en", "zh"}
    except (ValueError, AssertionError):
        print("--widths takes positive integers (e.g. 1280,360), --langs takes en and/or zh", file=sys.stderr)
        return 2
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("this check needs selenium: pip install selenium", file=sys.stderr)
        return 2
    pages = _pages(html, [p for p in args.pages.split(",") if p])
    if not pages:
        print(f"no page matches --pages {args.pages!r}", file=sys.stderr)
        return 2
    shot_pages = [p for p in args.shot_pages.split(",") if p]
    if args.shots:
        args.shots.mkdir(parents=True, exist_ok=True)

    server, base = _serve(html)
    drv = _driver(args)
    findings: dict[str, Any] = {"weights": {}, "shared": {}, "runs": []}
    defects: list[str] = []
    summary: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    try:
        for wi, width in enumerate(widths):
            _set_width(drv, width)
            for li, lang in enumerate(langs):
                drv.get(base + "index.html")
                drv.execute_script(f"localStorage.setItem('gemm-course-lang', '{lang}');")
                for page in pages:
                    _load(drv, base + page + ("?q=warp+tiling" if page == "search.html" else ""), args.timeout)
                    if wi == 0 and li == 0:
                        w = drv.execute_script(WEIGHT)
                        own = w["html"] + sum(n for u, n in w["resources"] if "/_static/" not in u
                                              and not u.endswith("searchindex.js"))
                        for u, n in w["resources"]:
                            if "/_static/" in u or u.endswith("searchindex.js"):
                                findings["shared"][u.split("?")[0].replace(base, "")] = n
                        first = w["html"] + sum(n for _, n in w["resources"])
                        findings["weights"][page] = {"own": own, "first_visit": first}
                        if own > MAX_OWN_BYTES:
                            defects.append(f"{page}: weighs {own / 1e6:.1f} MB of its own (limit 3 MB)")
                        dark = drv.execute_script(
                            "document.documentElement.dataset.theme='dark';"
                            "document.documentElement.dataset.mode='dark';" + DARK)
                        for d in dark:
                            defects.append(f"{page} dark mode: {d}")
                        summary[(width, lang)]["dark contrast"] += len(dark)
                        drv.execute_script("document.documentElement.dataset.theme='light';"
                                           "document.documentElement.dataset.mode='light';")
                    drv.execute_script("document.documentElement.dataset.theme='dark';"
                                       "document.documentElement.dataset.mode='dark';")
                    cap = drv.execute_script(CAPTIONS)
                    drv.execute_script("document.documentElement.dataset.theme='light';"
                                       "document.documentElement.dataset.mode='light';")
                    s, where = summary[(width, lang)], f"{page} @{width}px {lang}"
                    s["dark captions checked"] += cap["checked"]
                    s["dark captions under 4.5:1"] += len(cap["low"])
                    defects += [f"{where} dark mode: {d}" for d in cap["low"]]
                    if cap["worst"] is not None:
                        findings.setdefault("dark_caption_contrast", {})[f"{page} {width} {lang}"] = round(cap["worst"], 2)
                    if width < 600:
                        wide = drv.execute_script(TABLES)
                        s["wide tables"] += len(wide)
                        defects += [f"{where}: {t}" for t in wide]
                    if page == "search.html":
                        first, end = None, time.time() + 15
                        while first is None and time.time() < end:  # the hits come in one by one, best first
                            first = drv.execute_script(
                                "const a = document.querySelector('#search-results ul.search li a');"
                                "return a ? a.getAttribute('href') : null;")
                            time.sleep(0.2)
                        if not first or "08_warp_tiling" not in first:
                            defects.append(f"{where}: the first hit for 'warp tiling' is {first}, not Level 8")
                        queries = _level_queries(html)
                        drv.set_script_timeout(60)
                        top = drv.execute_async_script(SEARCH, list(queries))
                        wrong = {q: (top or {}).get(q) for q, doc in queries.items() if (top or {}).get(q) != doc}
                        s["search queries"] += len(queries)
                        s["search: level page not first"] += len(wrong)
                        defects += [f"{where}: search {q!r} puts {got!r} first, not {queries[q]}" for q, got in wrong.items()]
                    r = drv.execute_script(PROBE)
                    r.update(page=page, width=width)
                    findings["runs"].append(r)
                    s["pages"] += 1
                    if r["scrollWidth"] > r["vw"] + 1:
                        s["pages panning sideways"] += 1
                        defects.append(f"{where}: page {r['scrollWidth']} px wide: {'; '.join(r['overflowers'][:3])}")
                    s["charts"] += len(r["charts"])
                    for c in r["charts"]:
                        if c["defects"]:
                            s["charts with defects"] += 1
                            defects.append(f"{where}: chart \"{c['title'][:40]}\": {'; '.join(c['defects'])}")
                    s["other-language elements"] += len(r["otherLang"])
                    defects += [f"{where}: other language visible: {t}" for t in r["otherLang"][:3]]
                    s["outputs with Chinese (en mode)"] += len(r["outputsOtherLang"])
                    defects += [f"{where}: Chinese in an output: {t}" for t in r["outputsOtherLang"][:2]]
                    s["Latin-only outputs (zh mode, heuristic)"] += len(r["latinOutputs"])
                    s["theme labels in English (zh mode)"] += len(r["themeEnglish"])
                    if r["themeEnglish"]:
                        defects.append(f"{where}: theme labels in English: {', '.join(r['themeEnglish'][:8])}")
                    s["header defects"] += len(r["header"])
                    defects += [f"{where}: header: {t}" for t in r["header"]]
                    s["wrapped kernel listings"] += len(r["wrappedListings"])
                    defects += [f"{where}: kernel listing wraps: {t}" for t in r["wrappedListings"][:2]]
                    if args.shots and width == min(widths) and any(p in page for p in shot_pages):
                        name = page.replace("/", "_").replace(".html", "")
                        drv.save_screenshot(str(args.shots / f"{name}_{width}_{lang}.png"))
    finally:
        drv.quit()
        server.shutdown()

    weights = findings["weights"]
    if weights:
        shared = sum(findings["shared"].values())
        big = sorted(weights.items(), key=lambda kv: -kv[1]["own"])[:3]
        print(f"weight: {len(weights)} pages; own bytes max {big[0][1]['own'] / 1e6:.2f} MB ({big[0][0]}); "
              f"first visit max {max(v['first_visit'] for v in weights.values()) / 1e6:.2f} MB; "
              f"shared _static files loaded {shared / 1e6:.2f} MB (cached across pages)")
        for name, n in sorted(findings["shared"].items(), key=lambda kv: -kv[1])[:5]:
            print(f"   shared {name}: {n / 1e6:.2f} MB")
        print(f"   pages over 3 MB own: {sum(v['own'] > MAX_OWN_BYTES for v in weights.values())}; "
              f"over 3 MB on a first visit: {sum(v['first_visit'] > MAX_OWN_BYTES for v in weights.values())}")
    keys = ["pages", "pages panning sideways", "charts", "charts with defects", "other-language elements",
            "outputs with Chinese (en mode)", "Latin-only outputs (zh mode, heuristic)", "theme labels in English (zh mode)", "header defects",
            "wrapped kernel listings", "dark contrast", "dark captions checked", "dark captions under 4.5:1", "wide tables",
            "search queries", "search: level page not first"]
    print("\n" + "width lang | " + " | ".join(keys))
    for (width, lang), s in summary.items():
        print(f"{width:5} {lang:4} | " + " | ".join(str(s.get(k, 0)) for k in keys))
    if args.json:
        findings["defects"] = defects
        findings["summary"] = {f"{w} {l}": dict(s) for (w, l), s in summary.items()}
        args.json.write_text(json.dumps(findings, indent=1, ensure_ascii=False), encoding="utf-8")
    if defects:
        print(f"\n{len(defects)} defects:")
        for d in defects[:80]:
            print("  " + d)
        if len(defects) > 80:
            print(f"  ... and {len(defects) - 80} more" + (f" (all in {args.json})" if args.json else ""))
        return 1
    print("\nno defects")
    return 0


if __name__ == "__main__":
    sys.exit(main())
