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
      return lang === "zh" ? part.slice(i + SEP.length) : part.slice(0, i);
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

  function apply(lang) {
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
