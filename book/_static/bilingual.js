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

  // Figures: every "English · 中文" string of a plotly figure (titles, axis titles, annotations,
  // legend names, category labels) shows the chosen half. The originals are kept on the element.
  function collect(obj, path, out) {
    Object.keys(obj || {}).forEach(function (key) {
      var v = obj[key], p = path ? path + "." + key : key;
      if (typeof v === "string") { if (v.indexOf(SEP) >= 0) out[p] = v; }
      else if (Array.isArray(v)) v.forEach(function (item, i) {
        if (item && typeof item === "object") collect(item, p + "[" + i + "]", out);
      });
      else if (v && typeof v === "object" && key !== "template") collect(v, p, out);
    });
    return out;
  }

  function figureLang(div, lang) {
    if (!window.Plotly || !div || !div.layout || !div.data) return;
    if (!div._gemmLang) {
      div._gemmLang = {layout: collect(div.layout, "", {}), traces: div.data.map(function (t) {
        var keep = {};
        ["name", "x", "y", "text"].forEach(function (k) {
          var v = t[k];
          if (typeof v === "string" && v.indexOf(SEP) >= 0) keep[k] = v;
          else if (Array.isArray(v) && v.some(function (s) { return typeof s === "string" && s.indexOf(SEP) >= 0; })) keep[k] = v.slice();
        });
        return keep;
      })};
    }
    var orig = div._gemmLang, update = {};
    Object.keys(orig.layout).forEach(function (p) { update[p] = pick(orig.layout[p], lang); });
    if (Object.keys(update).length) window.Plotly.relayout(div, update);
    orig.traces.forEach(function (keep, i) {
      var style = {};
      Object.keys(keep).forEach(function (k) {
        var v = keep[k];
        style[k] = [Array.isArray(v) ? v.map(function (s) { return typeof s === "string" ? pick(s, lang) : s; })
                                     : pick(v, lang)];
      });
      if (Object.keys(style).length) window.Plotly.restyle(div, style, [i]);
    });
  }

  function figuresLang(lang) {
    Array.prototype.forEach.call(document.querySelectorAll(".gemm-figure"), function (div) {
      if (div.layout) figureLang(div, lang);
    });
  }
  // A figure drawn after the page loaded (plots.py's script) asks for the current language.
  window.gemmFigureLang = function (div) { figureLang(div, root.dataset.lang === "zh" ? "zh" : "en"); };

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

  // The theme's own labels (sidebar, search, previous/next, buttons) in Chinese when 中文 is chosen.
  var THEME_ZH = {
    "Contents": "目录", "Search": "搜索", "Search this book...": "搜索本书…", "Previous": "上一页",
    "Next": "下一页", "Back to top": "回到顶部", "Print to PDF": "打印为 PDF", "Fullscreen mode": "全屏模式",
    "Download source file": "下载源文件", "Download notebook file": "下载笔记本文件",
    "Download this page": "下载本页", "Launch interactive content": "启动交互式内容",
    "Source repository": "源代码仓库", "Toggle navigation": "切换导航", "Light/Dark": "浅色/深色",
    "Skip to main content": "跳到正文", "Search Results": "搜索结果"
  };
  var themeText = [];  // [node, english]
  var themeAttrs = [];  // [element, attribute, english]
  function findThemeLabels() {
    var chrome = document.querySelectorAll(".bd-header-article, .bd-sidebar-primary, .bd-sidebar-secondary, " +
      ".prev-next-area, .bd-search, .search-button, .bd-footer, .skip-link, #pst-back-to-top, .header-article-items");
    Array.prototype.forEach.call(chrome, function (el) {
      var walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT, null);
      while (walker.nextNode()) {
        var n = walker.currentNode, t = n.nodeValue.trim();
        if (THEME_ZH[t] && !n.parentElement.closest(".lang-en, .lang-zh")) themeText.push([n, n.nodeValue]);
      }
      Array.prototype.forEach.call(el.querySelectorAll("[title], [placeholder], [aria-label], [data-bs-original-title]"),
        function (e) {
          ["title", "placeholder", "aria-label", "data-bs-original-title"].forEach(function (a) {
            var v = e.getAttribute(a);
            if (v && THEME_ZH[v.trim()]) themeAttrs.push([e, a, v]);
          });
        });
    });
  }
  function themeLang(lang) {
    themeText.forEach(function (x) {
      var english = x[1];
      x[0].nodeValue = lang === "zh" ? english.replace(english.trim(), THEME_ZH[english.trim()]) : english;
    });
    themeAttrs.forEach(function (x) {
      x[0].setAttribute(x[1], lang === "zh" ? THEME_ZH[x[2].trim()] : x[2]);
    });
  }

  function apply(lang) {
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
    var buttons = document.querySelectorAll("#lang-switch [data-set-lang]");
    Array.prototype.forEach.call(buttons, function (b) {
      b.addEventListener("click", function () { setLang(b.getAttribute("data-set-lang")); });
    });
    apply(root.dataset.lang === "zh" ? "zh" : "en");
    // Search results arrive later; split their "A · B" titles too.
    var results = document.getElementById("search-results");
    if (results && window.MutationObserver) {
      new MutationObserver(splitLinkTexts).observe(results, {childList: true, subtree: true});
    }
  }

  // Another tab changed the language: follow it.
  window.addEventListener("storage", function (e) {
    if (e.key === KEY && (e.newValue === "en" || e.newValue === "zh")) apply(e.newValue);
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
