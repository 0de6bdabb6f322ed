// autocad-bench dashboard: live updates (server-sent events + server-rendered fragments)
// and the frame stepper. Every page works without this script (plain links); with it,
// nothing reloads: fragments rendered on the server replace parts of the page.
(function () {
  "use strict";
  var body = document.body;
  var $ = function (sel, el) { return (el || document).querySelector(sel); };

  // --- frame stepper -------------------------------------------------------------------
  var viewer = $("#viewer");
  var loading = null;

  function stepper() { return viewer ? $(".stepper", viewer) : null; }
  function currentStep() { var s = stepper(); return s ? parseInt(s.dataset.step || "0", 10) : 0; }
  function stepCount() { var s = stepper(); return s ? parseInt(s.dataset.steps || "0", 10) : 0; }

  function loadStep(n, pushUrl) {
    if (!viewer) return Promise.resolve();
    var url = new URL(viewer.dataset.src, location.href);
    url.searchParams.set("step", String(n));
    var token = {};
    loading = token;
    return fetch(url, { headers: { Accept: "text/html" } }).then(function (r) {
      if (!r.ok || loading !== token) return;
      return r.text().then(function (html) {
        if (loading !== token) return;
        viewer.innerHTML = html;
        viewer.dataset.loaded = String(currentStep());
        if (pushUrl) {
          var here = new URL(location.href);
          here.searchParams.set("step", String(currentStep()));
          history.replaceState(null, "", here);
        }
      });
    });
  }

  if (viewer) {
    viewer.dataset.loaded = String(currentStep());
    viewer.addEventListener("click", function (e) {
      var a = e.target.closest("a.step-nav");
      if (!a) return;
      e.preventDefault();
      loadStep(parseInt(a.dataset.step, 10), true);
    });
    viewer.addEventListener("change", function (e) {
      if (e.target.id === "step-range") loadStep(parseInt(e.target.value, 10), true);
    });
    document.addEventListener("keydown", function (e) {
      if (e.target.closest("input, textarea, select")) return;
      if (e.key === "ArrowRight" && currentStep() < stepCount() - 1) loadStep(currentStep() + 1, true);
      if (e.key === "ArrowLeft" && currentStep() > 0) loadStep(currentStep() - 1, true);
    });
    document.addEventListener("click", function (e) {
      var a = e.target.closest("a.turn-link");
      if (!a) return;
      e.preventDefault();
      loadStep(parseInt(a.dataset.step, 10), true);
      viewer.scrollIntoView({ block: "nearest" });
    });
  }
  var toggle = $("#show-overlay");
  if (toggle) {
    toggle.addEventListener("change", function () { body.classList.toggle("no-overlay", !toggle.checked); });
  }

  // --- live updates --------------------------------------------------------------------
  var live = $("#live");
  if (!body.dataset.events || !live || !window.EventSource) return;
  var sig = body.dataset.sig;
  var busy = false, again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var url = new URL(body.dataset.fragment, location.href);
    new URLSearchParams(location.search).forEach(function (v, k) {
      if (!url.searchParams.has(k) && k !== "step") url.searchParams.set(k, v);
    });
    fetch(url, { headers: { Accept: "text/html" } }).then(function (r) {
      if (!r.ok) return;
      return r.text().then(function (html) {
        live.innerHTML = html;
        body.dataset.refreshed = String(parseInt(body.dataset.refreshed || "0", 10) + 1);
        var count = $("#steps-count", live);
        if (viewer && count) {
          var steps = parseInt(count.dataset.steps || "0", 10);
          if (steps !== stepCount()) {
            // Follow the newest frame when the viewer was showing the last one.
            var following = stepCount() === 0 || currentStep() >= stepCount() - 1;
            return loadStep(following ? Math.max(0, steps - 1) : currentStep(), following);
          }
        }
      });
    }).catch(function () {}).then(function () {
      busy = false;
      if (again) { again = false; refresh(); }
    });
  }

  var dot = $("#live-indicator");
  var source = new EventSource(body.dataset.events);
  source.addEventListener("open", function () { if (dot) dot.classList.add("on"); });
  source.addEventListener("error", function () { if (dot) dot.classList.remove("on"); });
  source.addEventListener("change", function (e) {
    if (e.data === sig) return;
    sig = e.data;
    body.dataset.sig = sig;
    refresh();
  });
})();
