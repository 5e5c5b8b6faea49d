(function () {
  "use strict";
  // Every text comes from the run (hostile input): it is set with
  // textContent or as an attribute value, never parsed as markup.
  var data = JSON.parse(document.getElementById("outpost-data").textContent);
  var jobs = data.jobs, PAGE = 200;
  var state = { grade: "all", outcome: "all", query: "", shown: 0, list: [] };
  var rows = document.getElementById("job-rows");
  var more = document.getElementById("job-more");
  var shownNote = document.getElementById("shown");
  var open = {};
  // Details come in chunks of data.chunk jobs (a gzipped JSON array as a
  // base64 JSON string), inflated and parsed when first needed.
  var chunks = document.querySelectorAll("script.outpost-details"), parsed = {};
  function details(i) {
    var c = Math.floor(i / data.chunk);
    if (!parsed[c]) {
      var bin = atob(JSON.parse(chunks[c].textContent)), bytes = new Uint8Array(bin.length);
      for (var k = 0; k < bin.length; k++) { bytes[k] = bin.charCodeAt(k); }
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      parsed[c] = new Response(stream).text().then(JSON.parse);
    }
    return parsed[c].then(function (list) { return list[i % data.chunk]; });
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null && text !== "") { e.textContent = String(text); }
    return e;
  }
  function td(text, cls) { return el("td", cls, text); }
  var gradeClass = { "pass": "gr-pass", "fail": "gr-fail", "error": "gr-error", "not graded": "gr-none", "unfinished": "gr-unfinished" };
  // tone is one of the page's fixed classes (chosen by the generator).
  function safeTone(t) { return /^st-[a-z]+$/.test(t) ? t : "st-failed"; }

  function matches(j) {
    if (state.grade !== "all" && j.grade !== state.grade) { return false; }
    if (state.outcome === "ok" && j.status !== "ok") { return false; }
    if (state.outcome === "failed" && j.status === "ok") { return false; }
    return state.query === "" || j.find.indexOf(state.query) >= 0;
  }

  function row(i) {
    var j = jobs[i];
    var tr = el("tr", "row");
    tr.setAttribute("data-i", String(i));
    tr.setAttribute("data-grade", j.grade);
    tr.appendChild(td(i + 1, "n"));
    var c = td("");
    var a = el("a", "jobid", j.id);
    a.href = "#job-" + (i + 1);
    a.addEventListener("click", function (ev) { ev.preventDefault(); toggle(i, tr); history.replaceState(null, "", "#job-" + (i + 1)); });
    c.appendChild(a);
    tr.appendChild(c);
    tr.appendChild(td(j.task ? j.task + (j.trial ? " #" + j.trial : "") : ""));
    tr.appendChild(td(j.agents));
    c = td("");
    c.appendChild(el("span", "pill " + gradeClass[j.grade], j.grade));
    tr.appendChild(c);
    tr.appendChild(td(j.reward, "n"));
    c = td("");
    c.appendChild(el("span", "pill " + safeTone(j.tone), j.status));
    if (j.detail) { c.appendChild(document.createTextNode(" ")); c.appendChild(el("span", "muted", j.detail)); }
    tr.appendChild(c);
    tr.appendChild(td(j.duration, "n"));
    tr.appendChild(td(j.turns, "n"));
    tr.appendChild(td(j.retries, "n"));
    tr.appendChild(td(j.parks, "n"));
    tr.appendChild(td(j.tokens, "n"));
    c = td(j.cost, "n");
    c.title = j.cost_note;
    tr.appendChild(c);
    return tr;
  }

  function render(reset) {
    if (reset) {
      state.list = [];
      for (var i = 0; i < jobs.length; i++) { if (matches(jobs[i])) { state.list.push(i); } }
      state.shown = 0;
      rows.textContent = "";
      open = {};
    }
    var end = Math.min(state.list.length, state.shown + PAGE);
    var frag = document.createDocumentFragment();
    for (var k = state.shown; k < end; k++) { frag.appendChild(row(state.list[k])); }
    rows.appendChild(frag);
    state.shown = end;
    more.hidden = state.shown >= state.list.length;
    shownNote.textContent = state.list.length + " of " + jobs.length + " jobs match" +
      (state.shown < state.list.length ? "; the first " + state.shown + " are shown" : "");
  }

  // Details, built when a job is opened.
  function section(title, cls) {
    var s = el("section", "part " + (cls || ""));
    s.appendChild(el("h4", "", title));
    return s;
  }
  function pre(text, cls) { return el("pre", cls || "", text); }
  function diff(text) {
    var p = el("pre", "diff");
    var lines = text.split("\n");
    if (lines.length && lines[lines.length - 1] === "") { lines.pop(); }
    for (var i = 0; i < lines.length; i++) {
      var l = lines[i], cls = "";
      if (l.indexOf("+++ ") === 0 || l.indexOf("--- ") === 0 || l.indexOf("diff --git") === 0 || l.indexOf("index ") === 0) { cls = "d-file"; }
      else if (l.indexOf("@@") === 0) { cls = "d-hunk"; }
      else if (l.charAt(0) === "+") { cls = "d-add"; }
      else if (l.charAt(0) === "-") { cls = "d-del"; }
      p.appendChild(el("span", cls, l + "\n"));
    }
    return p;
  }
  function conversation(items) {
    var ol = el("ol", "conversation");
    items.forEach(function (it) {
      var li = el("li", "msg k-" + (/^[a-z-]+$/.test(it.k) ? it.k : "raw") + (it.f ? " final" : ""));
      var head = el("div", "head");
      head.appendChild(el("span", "who", it.t));
      if (it.f) { head.appendChild(el("span", "badge", "final")); }
      if (it.m) { head.appendChild(el("span", "meta", it.m)); }
      if (it.k === "reasoning" || it.k === "raw") {
        var d = el("details");
        var s = el("summary");
        s.appendChild(head);
        d.appendChild(s);
        if (it.x) { d.appendChild(el("div", "text", it.x)); }
        if (it.c) { d.appendChild(pre(it.c)); }
        li.appendChild(d);
      } else {
        li.appendChild(head);
        if (it.x) { li.appendChild(el("div", "text", it.x)); }
        if (it.c) { li.appendChild(pre(it.c)); }
      }
      ol.appendChild(li);
    });
    return ol;
  }
  function extra(title, node) {
    var d = el("details", "extra");
    d.appendChild(el("summary", "", title));
    d.appendChild(node);
    return d;
  }
  function detail(i, d) {
    var j = jobs[i];
    var box = el("div", "jobbody");
    box.id = "job-" + (i + 1);
    if (d.omitted) { box.appendChild(el("p", "note", d.omitted)); return box; }
    var s = section("prompt", "prompt");
    if (d.prompt) {
      s.appendChild(el("div", "text prompt-text", d.prompt));
      if (d.prompt_cut) { s.appendChild(el("p", "note", d.prompt_cut + " more bytes of the prompt were not kept")); }
    } else {
      s.appendChild(el("p", "empty", "The run directory kept no prompt for this job (a results file has none)."));
    }
    box.appendChild(s);
    if (d.metadata) { s = section("metadata"); s.appendChild(pre(d.metadata)); box.appendChild(s); }
    s = section("verdict", "verdict");
    var v = el("p", "");
    v.appendChild(el("span", "pill " + gradeClass[j.grade], j.grade));
    v.appendChild(document.createTextNode(j.grade === "not graded" ? " the job has no verifier" : " reward " + j.reward));
    s.appendChild(v);
    if (d.verify) {
      var vm = [];
      if (d.verify.exit) { vm.push("exit code " + d.verify.exit); }
      if (d.verify.duration) { vm.push("took " + d.verify.duration); }
      if (vm.length) { s.appendChild(el("p", "muted", "verifier: " + vm.join(", "))); }
      if (d.verify.error) { s.appendChild(el("div", "outcome bad", d.verify.error)); }
      if (d.verify.output) { s.appendChild(el("h5", "", "verifier output (tail)")); s.appendChild(pre(d.verify.output, "verify-output")); }
    }
    box.appendChild(s);
    s = section("run outcome");
    if (d.error) {
      var o = el("div", "outcome bad");
      o.appendChild(el("strong", "", j.detail || j.status));
      o.appendChild(pre(d.error));
      s.appendChild(o);
    } else if (j.status === "ok") {
      s.appendChild(el("div", "outcome neutral", "the run ended ok" + (j.retries || j.parks ? " after " + j.retries + " outage retries and " + j.parks + " quota parks" : "") +
        (j.grade === "not graded" ? " (not graded)" : "")));
    }
    if (d.text) { s.appendChild(el("div", "text answer", d.text)); }
    box.appendChild(s);
    if (d.patch || (d.files && d.files.length)) {
      s = section("patch");
      if (d.files && d.files.length) { s.appendChild(el("p", "muted", "changed: " + d.files.join(", "))); }
      if (d.patch) { s.appendChild(diff(d.patch)); }
      box.appendChild(s);
    }
    s = section("trajectory");
    if (!d.attempts || !d.attempts.length) {
      s.appendChild(el("p", "empty", "No trajectory: the input is a results file, or the run recorded no attempt."));
    }
    (d.attempts || []).forEach(function (a) {
      var at = el("section", "attempt");
      at.setAttribute("data-attempt", String(a.n));
      var h = el("h3", "", "attempt " + a.n + " ");
      h.appendChild(el("span", "pill " + safeTone(a.tone), a.status));
      h.appendChild(el("span", "muted", [a.agent, a.model, a.started, a.duration].filter(Boolean).join(" · ")));
      at.appendChild(h);
      if (a.usage) { at.appendChild(el("p", "usage", a.usage)); }
      if (a.items) { at.appendChild(conversation(a.items)); }
      if (a.omitted) { at.appendChild(el("p", "note", a.omitted + " more events were not loaded for this page.")); }
      if (a.truncated) { at.appendChild(el("p", "note", a.truncated)); }
      if (a.unfinished) { at.appendChild(el("p", "note", "This attempt never finished: the run stopped during it.")); }
      if (a.error) {
        var ob = el("div", "outcome bad");
        ob.appendChild(el("strong", "", a.detail));
        ob.appendChild(pre(a.error));
        at.appendChild(ob);
      }
      if (a.stderr) { at.appendChild(extra("stderr tail", pre(a.stderr))); }
      if (a.patch) { at.appendChild(extra("this attempt's patch", diff(a.patch))); }
      s.appendChild(at);
    });
    box.appendChild(s);
    return box;
  }
  function toggle(i, tr) {
    if (open[i]) {
      open[i].remove();
      delete open[i];
      tr.classList.remove("opened");
      return;
    }
    var dt = el("tr", "detail");
    var c = el("td");
    c.colSpan = 13;
    c.appendChild(el("p", "muted loading", "loading…"));
    dt.appendChild(c);
    tr.after(dt);
    tr.classList.add("opened");
    open[i] = dt;
    details(i).then(function (d) {
      c.textContent = "";
      c.appendChild(detail(i, d));
    }, function (err) {
      c.textContent = "";
      c.appendChild(el("p", "note", "This job's details could not be read: " + err));
    });
  }

  document.querySelectorAll("#grade-filter button").forEach(function (b) {
    b.addEventListener("click", function () {
      state.grade = b.getAttribute("data-grade");
      document.querySelectorAll("#grade-filter button").forEach(function (o) { o.classList.toggle("on", o === b); });
      render(true);
    });
  });
  document.getElementById("outcome-filter").addEventListener("change", function (ev) { state.outcome = ev.target.value; render(true); });
  var timer = 0;
  document.getElementById("search").addEventListener("input", function (ev) {
    clearTimeout(timer);
    var q = ev.target.value.trim().toLowerCase();
    timer = setTimeout(function () { state.query = q; render(true); }, jobs.length > 2000 ? 150 : 0);
  });
  document.getElementById("job-more-button").addEventListener("click", function () { render(false); });

  // Tasks: a page at a time too.
  var taskRows = document.getElementById("task-rows"), taskShown = 0;
  function renderTasks() {
    if (!taskRows) { return; }
    var end = Math.min(data.tasks.length, taskShown + PAGE), frag = document.createDocumentFragment();
    for (var k = taskShown; k < end; k++) {
      var t = data.tasks[k], tr = el("tr", "");
      [t.task, t.n, t.c, t.errors, t.pass1, t.passn].forEach(function (v, n) { tr.appendChild(td(v, n ? "n" : "")); });
      if (data.k > 1) { tr.appendChild(td(t.passk || "—", "n")); }
      tr.appendChild(td(t.reward, "n"));
      frag.appendChild(tr);
    }
    taskRows.appendChild(frag);
    taskShown = end;
    document.getElementById("task-more").hidden = taskShown >= data.tasks.length;
  }
  if (taskRows) { document.getElementById("task-more-button").addEventListener("click", renderTasks); }

  renderTasks();
  render(true);
  var m = /^#job-(\d+)$/.exec(location.hash);
  if (m) {
    var tr = rows.querySelector('tr[data-i="' + (Number(m[1]) - 1) + '"]');
    if (tr) { toggle(Number(m[1]) - 1, tr); tr.scrollIntoView(); }
  }
  // The first render is done once the browser has laid out and painted
  // the rows: record when (milliseconds since navigation started).
  requestAnimationFrame(function () {
    setTimeout(function () { document.body.setAttribute("data-rendered", String(Math.round(performance.now()))); }, 0);
  });
})();
