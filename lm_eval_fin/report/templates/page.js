(function () {
  "use strict";
  var board = document.getElementById("board") || document.createElement("table");  // answers pages have none
  function key(cell, numeric) {
    var v = cell ? cell.getAttribute("data-v") : "";
    if (!numeric) return v || "";
    var x = parseFloat(v);
    return isNaN(x) ? null : x;
  }
  // sorting: the model rows only; baselines and papers' figures stay in their groups
  board.querySelectorAll("th[data-col]").forEach(function (th) {
    th.addEventListener("click", function () {
      var col = +th.getAttribute("data-col"), numeric = th.getAttribute("data-sort") === "num";
      var current = th.getAttribute("aria-sort");
      // first click: figures high to low (place and names in order); then each click flips
      var down = current && current !== "none" ? current === "ascending" : numeric && col > 1;
      board.querySelectorAll("th[aria-sort]").forEach(function (other) { other.setAttribute("aria-sort", "none"); });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      var body = board.querySelector("tbody.models"), rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a.cells[col], numeric), y = key(b.cells[col], numeric);
        if (x === null || y === null) return (x === null) - (y === null);  // no value: last
        var order = numeric ? x - y : String(x).localeCompare(String(y));
        return down ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
  // search: rows whose name, settings or badges hold every word typed
  var search = document.getElementById("search") || document.createElement("input");
  function filterRows() {
    var words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    document.querySelectorAll("#board tbody tr[data-label], table.subsets tr[data-label]").forEach(function (tr) {
      var text = tr.getAttribute("data-label").toLowerCase();
      tr.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
    });
  }
  search.addEventListener("input", filterRows);
  // column filter: a benchmark's headline column, or the cost columns, shown or hidden
  document.querySelectorAll("#column-filter input[data-group]").forEach(function (box) {
    box.addEventListener("change", function () {
      var group = box.getAttribute("data-group");
      board.querySelectorAll('[data-group="' + group + '"]').forEach(function (cell) { cell.hidden = !box.checked; });
    });
  });
  function show(section, row) {
    section.querySelectorAll(".answer").forEach(function (a) {
      a.hidden = row !== "all" && a.getAttribute("data-row") !== row;
    });
    section.querySelectorAll(".filters a").forEach(function (a) {
      a.classList.toggle("on", a.getAttribute("data-row") === row);
    });
    var first = null;
    section.querySelectorAll("details.question").forEach(function (d) {
      var has = row === "all" || d.querySelector('.answer[data-row="' + row + '"]');
      d.hidden = !has;
      if (has && !first) first = d;
    });
    if (first && row !== "all") first.open = true;
  }
  function route() {
    var m = /^#answers-(.+)-(?:r(\d+)|all)$/.exec(location.hash);
    if (m) {
      var section = document.getElementById("answers-" + m[1]);
      if (!section) return;
      show(section, m[2] || "all");
      section.scrollIntoView();
      return;
    }
    var target = location.hash && document.getElementById(location.hash.slice(1));
    var panel = target && target.closest("details.panel");
    if (panel) { panel.open = true; target.scrollIntoView(); }
  }
  // the next page of a task's questions keeps the row shown
  document.querySelectorAll("a.pager").forEach(function (a) {
    a.addEventListener("click", function () { a.href = a.getAttribute("href").split("#")[0] + location.hash; });
  });
  window.addEventListener("hashchange", route);
  route();
  // print everything: every panel and question unfolded, every run's answer shown; restored after
  var folded = [], hidden = [];
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details:not([open])").forEach(function (d) { d.open = true; folded.push(d); });
    document.querySelectorAll("#answers [hidden]").forEach(function (e) { e.hidden = false; hidden.push(e); });
  });
  window.addEventListener("afterprint", function () {
    folded.forEach(function (d) { d.open = false; });
    hidden.forEach(function (e) { e.hidden = true; });
    folded = []; hidden = [];
  });
})();
