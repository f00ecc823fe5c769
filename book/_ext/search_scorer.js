/* The book's search: a page whose title names the query comes first (see book/_ext/bilingual.py).
 *
 * Sphinx inlines this file into _static/language_data.js (html_search_scorer), which search.html loads
 * after searchtools.js, so Search, Stemmer and stopwords exist when a query runs. Two changes:
 *
 * 1. splitQuery: a Chinese run that the index does not hold as one word (the index splits Chinese
 *    with jieba; a reader's query is not split) is cut into the longest words the index does hold,
 *    so 合并访问与存储体冲突 finds the pages that hold 合并访问 and 存储体冲突. One-character
 *    leftovers (与, 的: the index keeps no one-character word) are dropped.
 * 2. Scorer.score: Sphinx scores a word in any section title of a page like a word in its page title,
 *    and breaks ties alphabetically, so "register blocking" put the glossary and other levels before
 *    Level 5. A page whose title ("Level 5: register blocking · 第 5 级：寄存器分块") names the query,
 *    in either language, with or without "Level N:" / "第 N 级：", now scores above any other match:
 *    the query's words must be a run of the title's words (English stemmed, Chinese by character)
 *    that covers at least half of it, as Sphinx asks of a title match.
 */
var Scorer = (function (base) {
  "use strict";
  var CJK = /[\u3400-\u9fff\uf900-\ufaff]/;
  var CJK_RUN = /[\u3400-\u9fff\uf900-\ufaff]+/g;
  var lastQuery = "";
  var titleCache = null;

  function stem(word) {
    try { return new Stemmer().stemWord(word); } catch (e) { return word; }
  }

  // Words of a text: English lower-cased and stemmed (stop words dropped), Chinese one character each.
  function tokens(text) {
    var out = [];
    String(text || "").toLowerCase().split(/[^\p{Letter}\p{Number}_]+/u).forEach(function (part) {
      if (!part) return;
      var i = 0;
      part.replace(CJK_RUN, function (run, at) {
        if (at > i) latin(part.slice(i, at));
        for (var k = 0; k < run.length; k++) out.push(run[k]);
        i = at + run.length;
        return run;
      });
      if (i < part.length) latin(part.slice(i));
    });
    return out;
    function latin(w) {
      if (typeof stopwords !== "undefined" && stopwords.indexOf(w) !== -1) return;
      out.push(stem(w));
    }
  }

  // The page titles as the reader may type them: the whole, each half of "English · 中文", and each half
  // without its "Level N:" / "第 N 级：" start.
  function pageTitles(docname) {
    if (!titleCache) {
      titleCache = {};
      var index = (typeof Search !== "undefined" && Search._index) || {};
      (index.docnames || []).forEach(function (name, i) {
        var div = String(index.titles[i] || "").replace(/<[^>]*>/g, "")
          .replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
        var forms = [tokens(div)];
        div.split(" \u00b7 ").forEach(function (half) {
          forms.push(tokens(half));
          var bare = half.replace(/^\s*Level\s+\d+\s*[:\u2014-]\s*/i, "").replace(/^\s*第\s*\d+\s*级\s*[：:]\s*/, "");
          if (bare !== half) forms.push(tokens(bare));
        });
        titleCache[name] = forms.filter(function (f) { return f.length; });
      });
    }
    return titleCache[docname] || [];
  }

  // How much of one of the page's titles the query names: the share of its words (0 when the query's
  // words are not a run of that title's words, or cover less than half of it).
  function titleCoverage(docname, query) {
    var q = tokens(query), best = 0;
    if (!q.length) return 0;
    pageTitles(docname).forEach(function (t) {
      for (var i = 0; i + q.length <= t.length; i++) {
        var k = 0;
        while (k < q.length && t[i + k] === q[k]) k++;
        if (k === q.length) { best = Math.max(best, q.length / t.length); break; }
      }
    });
    return best >= 0.5 ? best : 0;
  }

  base.pageTitleBoost = 100;
  base.titleCoverage = titleCoverage;
  base.setQuery = function (query) { lastQuery = query || ""; };
  // [docname, title, anchor, descr, score, filename] -> score; only the page itself (no anchor) is raised
  base.score = function (result) {
    var score = result[4];
    if (result[2] || !lastQuery) return score;
    var c = titleCoverage(result[0], lastQuery);
    return c ? score + base.pageTitleBoost * (0.5 + c / 2) : score;
  };
  return base;
})(typeof Scorer !== "undefined" ? Scorer : {
  // (searchtools.js's defaults, for a page that loads this file first)
  objNameMatch: 11, objPartialMatch: 6, objPrio: {0: 15, 1: 5, 2: -5}, objPrioDefault: 0,
  title: 15, partialTitle: 7, term: 5, partialTerm: 2
});

var splitQuery = (function () {
  "use strict";
  var CJK_RUN = /^[\u3400-\u9fff\uf900-\ufaff]+$/;
  var LONGEST = 12;

  function known(word) {
    var index = typeof Search !== "undefined" && Search._index;
    if (!index) return true;  // no index yet: keep the word whole
    return Object.prototype.hasOwnProperty.call(index.terms, word) ||
      Object.prototype.hasOwnProperty.call(index.titleterms, word);
  }

  // The longest words the index holds, left to right; characters that start none are dropped.
  function cut(run) {
    var out = [];
    for (var i = 0; i < run.length;) {
      var n = Math.min(LONGEST, run.length - i);
      while (n > 1 && !known(run.substr(i, n))) n--;
      if (n > 1) out.push(run.substr(i, n));
      i += n;
    }
    return out;
  }

  return function (query) {
    Scorer.setQuery(query);
    var out = [];
    query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu).forEach(function (term) {
      if (!term) return;
      // a Chinese run the index does not hold as one word; a mixed term such as "fp8量化" stays whole
      if (CJK_RUN.test(term) && !known(term)) out.push.apply(out, cut(term));
      else out.push(term);
    });
    return out;
  };
})();

// One hit per place: a page whose whole title was searched came twice (once as a title, once for its words,
// their titles spelt differently); keep the better of each page and anchor.
(function () {
  "use strict";
  if (typeof Search === "undefined" || !Search._performSearch || Search._performSearch._gemmOnce) return;
  var perform = Search._performSearch;
  Search._performSearch = function () {
    var results = perform.apply(Search, arguments), seen = {}, kept = [];
    for (var i = results.length - 1; i >= 0; i--) {  // best last (the page shows them from the end)
      var key = results[i][0] + "\u0000" + results[i][2];
      if (!seen[key]) { seen[key] = true; kept.push(results[i]); }
    }
    return kept.reverse();
  };
  Search._performSearch._gemmOnce = true;
})();
