/* Language switch for the bilingual gemm-course book (see book/_ext/bilingual.py).
 * The <head> script already set <html data-lang>; here we wire the switch, split
 * "English · 中文" link texts and the tab title, and tag "on this page" links that
 * point to a section of one language so CSS can hide them. */
(function () {
  "use strict";
  var KEY = "gemm-course-lang";
  var SEP = " \u00b7 ";
  var root = document.documentElement;
  var originalTitle = document.title;

  // "A · B — Book A · Book B" -> the half of each part in the chosen language.
  function pick(text, lang) {
    return text.split(" \u2014 ").map(function (part) {
      var i = part.indexOf(SEP);
      if (i < 0) return part;
      var half = lang === "zh" ? part.slice(i + SEP.length) : part.slice(0, i);
      return half.replace(/^(\s*<br>\s*)+|(\s*<br>\s*)+$/g, "");  // a figure title wrapped at the separator
    }).join(" \u2014 ");
  }

  function span(cls, text) {
    var s = document.createElement("span");
    s.className = cls;
    s.textContent = text;
    return s;
  }

  // Wrap both halves of every "A · B" text inside links (nav, prev/next, cross-refs),
  // the book title and the print title in lang-en / lang-zh spans; CSS shows one.
  // (Most titles already arrive split from the build; this catches plain-text ones.)
  function splitLinkTexts() {
    var walker = document.createTreeWalker(document.body || root, NodeFilter.SHOW_TEXT, {
      acceptNode: function (n) {
        var p = n.parentElement;
        if (!p || n.nodeValue.indexOf(SEP) < 0) return NodeFilter.FILTER_REJECT;
        if (!p.closest("a, .logo__title, #jb-print-docs-body h1")) return NodeFilter.FILTER_REJECT;
        if (p.closest(".lang-sep, pre, code")) return NodeFilter.FILTER_REJECT;
        return NodeFilter.FILTER_ACCEPT;
      }
    });
    var found = [];
    while (walker.nextNode()) found.push(walker.currentNode);
    found.forEach(function (n) {
      var text = n.nodeValue, i = text.indexOf(SEP);
      var frag = document.createDocumentFragment();
      frag.appendChild(span("lang-en", text.slice(0, i)));
      frag.appendChild(span("lang-sep", SEP));
      frag.appendChild(span("lang-zh", text.slice(i + SEP.length)));
      n.parentNode.replaceChild(frag, n);
    });
  }

  // "On this page" entries pointing at a section of one language get that language
  // (the build already does this; kept for tocs rendered by other means).
  function tagTocLinks() {
    var links = document.querySelectorAll(
      ".page-toc a[href^='#'], .bd-toc-nav a[href^='#'], #jb-print-toc a[href^='#']");
    Array.prototype.forEach.call(links, function (a) {
      var id;
      try { id = decodeURIComponent(a.getAttribute("href").slice(1)); } catch (e) { return; }
      var target = id && document.getElementById(id);
      var section = target && target.closest("section");
      if (!section) return;
      if (section.classList.contains("lang-section-en")) a.classList.add("lang-en");
      if (section.classList.contains("lang-section-zh")) a.classList.add("lang-zh");
    });
  }

  // Figures (gemm_course.display.plots): every "English · 中文" text of a plotly figure (titles, axes, legend names,
  // hover labels, annotations, category labels) shows the chosen half. plots.py's script hands the figure
  // to gemmDrawFigure, which keeps the bilingual original on the element and draws the picked copy; a
  // switch redraws it with Plotly.react. Only a separator with Latin text before it and Chinese after it
  // splits (an English " · ", a dot product, stays); hover templates keep their fields.
  var CJK_RE = /[\u3400-\u9fff\uff00-\uffef]/;
  function pickText(text, lang) {
    if (text.indexOf(SEP) < 0) return text;
    if (text.indexOf("<extra>") >= 0) {
      return text.replace(/(<extra>)([\s\S]*?)(<\/extra>)/g, function (m, a, mid, b) { return a + pickText(mid, lang) + b; });
    }
    var i = text.indexOf(SEP), en = text.slice(0, i), zh = text.slice(i + SEP.length);
    if (CJK_RE.test(en) || !CJK_RE.test(zh)) return text;
    return (lang === "zh" ? zh : en).replace(/^(\s*<br>\s*)+|(\s*<br>\s*)+$/g, "");
  }
  function pickAll(v, lang) {
    if (typeof v === "string") return pickText(v, lang);
    if (Array.isArray(v)) return v.map(function (x) { return pickAll(x, lang); });
    if (v && typeof v === "object") {
      var o = {};
      Object.keys(v).forEach(function (k) { o[k] = k === "template" ? v[k] : pickAll(v[k], lang); });
      return o;
    }
    return v;
  }
  function currentLang() { return root.dataset.lang === "zh" ? "zh" : "en"; }
  function drawFigure(div, lang, first) {
    var fig = div._gemmFig, data = pickAll(fig.data, lang), layout = pickAll(fig.layout, lang);
    // plots.py made room above the plot for the title's lines in both languages: give back the other's
    var title = fig.layout.title || {}, size = (title.font && title.font.size) || 17;
    var lines = function (t) { return typeof t === "string" && t ? t.split("<br>").length : 0; };
    var spare = Math.floor((lines(title.text) - lines((layout.title || {}).text)) * size * 1.35);
    if (spare > 0 && layout.margin && layout.margin.t > spare + 30 && layout.height) {
      layout.margin = Object.assign({}, layout.margin, {t: layout.margin.t - spare});
      layout.height -= spare;
      if (layout.title && typeof layout.title.y === "number") layout.title.y = 1 - (12 + size * 0.35) / layout.height;
      div.style.height = layout.height + "px";
    }
    div._gemmFigLang = lang;
    // No toolbar on a phone, where it sits on the title. plots.py's config asks window.innerWidth, which a
    // phone may report wider while the page is still loading (zoomed out to wide content); the layout
    // viewport's width is the phone's own.
    var config = Object.assign({}, div._gemmConfig);
    if (Math.min(root.clientWidth || Infinity, window.innerWidth || Infinity) < 700) config.displayModeBar = false;
    var drawn = (first ? window.Plotly.newPlot : window.Plotly.react)(div, data, layout, config);
    return drawn && drawn.then ? drawn.then(function () { return fitLegend(div); }) : drawn;
  }
  // plots.py lays a legend out under the x axis as a phone would show it in either language: it estimates
  // the tick labels and legend rows of "English · 中文" texts, which wrap there onto lines of both. Drawn in
  // one language, and often wider, they take less room. Measure what was drawn: the legend goes 10 px under
  // the lowest x tick label or x axis title, and the figure ends 12 px under the legend, so there is neither
  // a gap nor an overlap; the plot area keeps its height.
  function fitLegend(div) {
    var fl = div._fullLayout, lg = fl && fl.legend, size = fl && fl._size;
    if (!lg || !fl.showlegend || !size || lg.orientation !== "h" || lg.yanchor !== "top" || !(lg.y < 0) || !lg._height) return;
    var top = div.getBoundingClientRect().top, plotBottom = size.t + size.h, lowest = plotBottom;
    Array.prototype.forEach.call(div.querySelectorAll(".xtick text, .infolayer text"), function (t) {
      if (!/^(xtick|x\d*title)$/.test(t.getAttribute("class") || "") && !t.closest(".xtick")) return;
      var r = t.getBoundingClientRect();
      if (r.height && t.textContent) lowest = Math.max(lowest, r.bottom - top);
    });
    var y = -(lowest - plotBottom + 10) / size.h, need = Math.ceil(lowest + 10 + lg._height + 12);
    if (Math.abs(need - fl.height) < 6 && Math.abs(y - lg.y) * size.h < 6) return;
    div.style.height = need + "px";
    return window.Plotly.relayout(div, {height: need, "margin.b": fl.margin.b + need - fl.height, "legend.y": y});
  }
  window.gemmDrawFigure = function (id, fig, config) {
    var div = document.getElementById(id);
    if (!div || !window.Plotly) return;
    div._gemmFig = fig;
    div._gemmConfig = config;
    return drawFigure(div, currentLang(), true);
  };
  function figuresLang(lang) {
    Array.prototype.forEach.call(document.querySelectorAll(".gemm-figure"), function (div) {
      if (div._gemmFig && div._gemmFigLang !== lang && window.Plotly) drawFigure(div, lang, false);
    });
  }

  // Printed outputs that say the same thing twice, an English line followed by its Chinese line (or
  // "English · 中文" on one line), show the chosen language only: each half gets a lang class.
  var CJK = /[\u3400-\u9fff\uff00-\uffef]/;
  function splitOutputs() {
    var blocks = document.querySelectorAll("div.cell_output pre, div.output pre");
    Array.prototype.forEach.call(blocks, function (pre) {
      if (pre.dataset.gemmSplit || pre.querySelector(".lang-en, .lang-zh")) return;  // done, or marked up
      var lines = pre.textContent.split("\n"), out = [], changed = false;
      for (var i = 0; i < lines.length; i++) {
        var line = lines[i], next = lines[i + 1], sep = line.indexOf(SEP);
        if (!CJK.test(line) && next !== undefined && CJK.test(next) && line.trim() && /[A-Za-z]/.test(line)) {
          out.push(["lang-en", line], ["lang-zh", next]);
          i++;
          changed = true;
        } else if (sep > 0 && !CJK.test(line.slice(0, sep)) && CJK.test(line.slice(sep))) {
          out.push(["lang-en", line.slice(0, sep)], ["lang-zh", line.slice(sep + SEP.length)]);
          changed = true;
        } else {
          out.push(["", line]);
        }
      }
      pre.dataset.gemmSplit = "1";
      if (!changed) return;
      pre.textContent = "";
      out.forEach(function (part, j) {
        var s = document.createElement("span");
        if (part[0]) s.className = part[0];
        s.textContent = part[1] + (j < out.length - 1 ? "\n" : "");
        pre.appendChild(s);
      });
    });
  }

  // A printed block of sentences (no code, no aligned columns, no drawn map) may wrap on a narrow screen:
  // mark it gemm-prose (bilingual.css). Everything else keeps its lines and scrolls inside its box.
  var SHAPED = /[\u2500-\u259f]|[|+]-{3,}|-{3,}[|+]|\S {2,}\S.* {2,}\S|__global__|#include|[{};]\s*$|\/\*[0-9a-f]{4}\*\//m;
  function markProse() {
    var blocks = document.querySelectorAll("div.cell_output pre, div.output pre");
    Array.prototype.forEach.call(blocks, function (pre) {
      var printed = pre.closest(".output.stream, .output.text_plain, .output.error, .output.traceback");
      if (!printed && (pre.closest("div.highlight") || pre.querySelector("code"))) return;  // a listing
      var text = pre.textContent;
      var shaped = text.split("\n").some(function (line) { return SHAPED.test(line); });
      if (!shaped) pre.classList.add("gemm-prose");
    });
  }

  // The theme's own labels (sidebar, search, previous/next, footer, fold toggles, header buttons and their
  // tooltips) in Chinese when 中文 is chosen: an exact-text table, applied to text outside the book's own
  // content (code, printed outputs and language-tagged prose are never touched).
  var THEME_ZH = {
    "Contents": "目录", "On this page": "本页内容", "Search": "搜索", "Search this book...": "搜索本书…",
    "Search the docs ...": "搜索本书…", "Previous": "上一页", "Next": "下一页", "previous page": "上一页", "previous": "上一页", "next": "下一页",
    "next page": "下一页", "Back to top": "回到顶部", "Print to PDF": "打印为 PDF", "Fullscreen mode": "全屏模式",
    "Download source file": "下载源文件", "Download notebook file": "下载笔记本文件",
    "Download this page": "下载本页", "Launch interactive content": "启动交互式内容", "Launch": "启动",
    "Source repository": "源代码仓库", "Toggle navigation": "切换导航", "Light/Dark": "浅色/深色",
    "Skip to main content": "跳到正文", "Search Results": "搜索结果", "Searching": "正在搜索",
    "Preparing search...": "正在准备搜索…", "By gemm-course": "作者：gemm-course",
    "Color mode": "颜色模式", "Light": "浅色", "Dark": "深色", "System Settings": "跟随系统", "System": "跟随系统",
    "Toggle primary sidebar": "切换左侧边栏", "Toggle secondary sidebar": "切换右侧边栏",
    "Click to show": "点击显示", "Click to hide": "点击隐藏", "Toggle hidden content": "显示或隐藏内容",
    "Show code cell output": "显示代码单元的输出", "Hide code cell output": "隐藏代码单元的输出",
    "Show code cell outputs": "显示代码单元的输出", "Hide code cell outputs": "隐藏代码单元的输出",
    "Show code cell source": "显示代码单元的源码", "Hide code cell source": "隐藏代码单元的源码",
    "Show code cell content": "显示代码单元的内容", "Hide code cell content": "隐藏代码单元的内容",
    "Copy": "复制", "Copied!": "已复制！", "Copy to clipboard": "复制到剪贴板", "Open an issue": "提交问题",
    "Edit this page": "编辑本页", "Error": "错误", "Ctrl": "Ctrl",
    "Please activate JavaScript to enable the search functionality.": "请启用 JavaScript 以使用搜索功能。",
    "Search finished, found ${resultCount} page(s) matching the search query.":
      "搜索完成，找到 ${resultCount} 个匹配的页面。",
    "Your search did not match any documents. Please make sure that all words are spelled correctly and that you've selected enough categories.":
      "没有找到匹配的页面。请检查拼写是否正确。",
    ", in ": "，位于 "
  };
  var COPYRIGHT = /^©\s*Copyright\s+(\d{4})\.?$/;
  function themeZh(text) {
    var t = text.trim(), zh = THEME_ZH[t];
    if (zh === undefined && COPYRIGHT.test(t)) zh = t.replace(COPYRIGHT, "© $1 版权所有");
    return zh === undefined ? null : text.replace(t, zh);
  }
  // Sphinx's search page says its messages through Documentation.gettext: give it the Chinese catalog.
  // (doctools.js declares it with a top-level const: a global name, not a property of window.)
  var docs = typeof Documentation !== "undefined" ? Documentation : window.Documentation;  // eslint-disable-line no-undef
  if (root.dataset.lang === "zh" && docs && docs.TRANSLATIONS) {
    Object.keys(THEME_ZH).forEach(function (k) { docs.TRANSLATIONS[k] = THEME_ZH[k]; });
  }
  var ATTRS = ["title", "placeholder", "aria-label", "data-bs-title", "data-bs-original-title", "data-toggle-hint"];
  var themeText = [];  // [node, english]
  var themeAttrs = [];  // [element, attribute, english]
  function skipped(el) {
    return !el || el.closest("pre, code, .lang-en, .lang-zh, .cell_output, .cell_input, .gemm-figure, script, style");
  }
  function findThemeLabels(scope) {
    var walker = document.createTreeWalker(scope || document.body, NodeFilter.SHOW_TEXT, null);
    while (walker.nextNode()) {
      var n = walker.currentNode;
      if (n._gemmTheme || !n.nodeValue.trim() || skipped(n.parentElement) || themeZh(n.nodeValue) === null) continue;
      n._gemmTheme = true;
      themeText.push([n, n.nodeValue]);
    }
    Array.prototype.forEach.call((scope || document.body).querySelectorAll("[" + ATTRS.join("], [") + "]"), function (e) {
      if (skipped(e)) return;
      ATTRS.forEach(function (a) {
        var v = e.getAttribute(a), key = "_gemmAttr_" + a;
        if (v && !e[key] && themeZh(v) !== null) { e[key] = true; themeAttrs.push([e, a, v]); }
      });
    });
  }
  function themeLang(lang) {
    themeText.forEach(function (x) { x[0].nodeValue = lang === "zh" ? themeZh(x[1]) : x[1]; });
    themeAttrs.forEach(function (x) {
      if (x[0].hasAttribute(x[1]) || x[1] !== "title") x[0].setAttribute(x[1], lang === "zh" ? themeZh(x[2]) : x[2]);
    });
    // sphinx-togglebutton writes its hint from these globals on every click
    window.toggleHintShow = lang === "zh" ? THEME_ZH["Click to show"] : "Click to show";
    window.toggleHintHide = lang === "zh" ? THEME_ZH["Click to hide"] : "Click to hide";
  }

  // Code comments in two languages (the build marks their lines lang-en / lang-zh): what the switch hides is
  // marked gemm-off, which the copy button leaves out, so it copies the code with the reader's comments.
  function codeLang(lang) {
    var marked = document.querySelectorAll("pre .lang-en, pre .lang-zh");
    Array.prototype.forEach.call(marked, function (el) {
      var off = lang === "zh" ? el.classList.contains("lang-en") || el.classList.contains("gemm-under")
                              : el.classList.contains("lang-zh");
      el.classList.toggle("gemm-off", off);
    });
  }

  function apply(lang) {
    codeLang(lang);
    themeLang(lang);
    figuresLang(lang);
    root.dataset.lang = lang;
    root.lang = lang === "zh" ? "zh-CN" : "en";
    document.title = pick(originalTitle, lang);
    var buttons = document.querySelectorAll("#lang-switch [data-set-lang]");
    Array.prototype.forEach.call(buttons, function (b) {
      var on = b.getAttribute("data-set-lang") === lang;
      b.setAttribute("aria-pressed", on ? "true" : "false");
      b.classList.toggle("active", on);
    });
  }

  function setLang(lang) {
    try { localStorage.setItem(KEY, lang); } catch (e) {}
    apply(lang);
    document.dispatchEvent(new CustomEvent("gemm:lang", {detail: {lang: lang}}));
  }
  window.gemmSetLang = setLang;

  function init() {
    splitLinkTexts();
    tagTocLinks();
    findThemeLabels();
    splitOutputs();
    markProse();
    var buttons = document.querySelectorAll("#lang-switch [data-set-lang]");
    Array.prototype.forEach.call(buttons, function (b) {
      b.addEventListener("click", function () { setLang(b.getAttribute("data-set-lang")); });
    });
    apply(root.dataset.lang === "zh" ? "zh" : "en");
    // Search results arrive later; split their "A · B" titles too.
    var results = document.getElementById("search-results");
    if (results && window.MutationObserver) {
      new MutationObserver(function () {
        splitLinkTexts();
        findThemeLabels(results);
        themeLang(currentLang());
      }).observe(results, {childList: true, subtree: true});
    }
  }

  // Another tab changed the language: follow it.
  window.addEventListener("storage", function (e) {
    if (e.key === KEY && (e.newValue === "en" || e.newValue === "zh")) apply(e.newValue);
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
