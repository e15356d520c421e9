/* Pipeline UI: follow Airflow's colour mode, and open Airflow links in the page around us.
 *
 * Airflow 3 shows this app in an iframe sandboxed with "allow-scripts allow-same-origin" but
 * without top navigation or popups, so <a target="_top"> is blocked there. The frame is
 * same-origin, so the Airflow page's own router is asked to go to the link instead (push the
 * URL, announce it with popstate). Standalone, links behave as plain links. The colour mode
 * is the Airflow page's <html class="dark|light"> (next-themes), else its stored "theme",
 * else the system's (CSS media query). No stored data is ever read into this script.
 */
(function () {
  "use strict";
  var html = document.documentElement;

  function airflowDocument() {
    try {
      return window.top !== window ? window.top.document : null;
    } catch (e) {
      return null;
    }
  }

  function colourMode() {
    var doc = airflowDocument();
    if (doc) {
      var cls = doc.documentElement.classList;
      if (cls.contains("dark")) return "dark";
      if (cls.contains("light")) return "light";
    }
    try {
      var stored = window.localStorage.getItem("theme");
      if (stored === "dark" || stored === "light") return stored;
    } catch (e) { /* storage blocked: follow the system */ }
    return null;
  }

  function applyMode() {
    var mode = colourMode();
    if (mode) html.setAttribute("data-theme", mode);
    else html.removeAttribute("data-theme");
  }

  applyMode();
  var doc = airflowDocument();
  if (doc && window.MutationObserver) {
    new MutationObserver(applyMode).observe(doc.documentElement,
      { attributes: true, attributeFilter: ["class"] });
  }
  window.addEventListener("storage", applyMode);

  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest('a[target="_top"]') : null;
    if (!link || window.top === window || event.defaultPrevented || event.button !== 0 ||
        event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    try {
      var top = window.top;
      var url = new URL(link.href, window.location.href);
      if (url.origin !== top.location.origin) return;
      var state = top.history.state || {};
      top.history.pushState({ usr: null, key: Math.random().toString(36).slice(2, 10),
                              idx: (typeof state.idx === "number" ? state.idx : 0) + 1 },
                            "", url.pathname + url.search + url.hash);
      top.dispatchEvent(new PopStateEvent("popstate", { state: top.history.state }));
      event.preventDefault();
    } catch (e) { /* leave it to the browser */ }
  });
})();
