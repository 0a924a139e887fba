// fairque dashboard: live refresh of the page's main section. No inline script anywhere
// (the Content-Security-Policy forbids it); the server renders and escapes every value,
// and the refreshed HTML is parsed with DOMParser, which runs no script.
(function () {
  "use strict";
  var KEY = "fairque.live";
  var PERIOD = 5000;
  var box = document.getElementById("live");
  if (!box) { return; }
  box.checked = window.localStorage.getItem(KEY) === "1";
  box.addEventListener("change", function () {
    window.localStorage.setItem(KEY, box.checked ? "1" : "0");
  });
  function busy() {
    var el = document.activeElement;
    if (!el || el === box) { return false; }
    return el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA";
  }
  function refresh() {
    if (!box.checked || busy() || document.hidden) { return; }
    fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        var main = document.getElementById("main");
        if (fresh && main) { main.replaceWith(document.adoptNode(fresh)); }
      })
      .catch(function () { /* the next tick tries again */ });
  }
  window.setInterval(refresh, PERIOD);
})();
