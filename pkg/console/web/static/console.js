// HyperFleet console: live job logs (server-sent events), live power states, memory meters.
(function () {
  "use strict";

  // refreshFacts updates the job page's VM facts from the API, at most every two seconds.
  var lastFacts = 0;
  function refreshFacts(force) {
    var facts = document.getElementById("vm-facts");
    if (!facts || (!force && Date.now() - lastFacts < 2000)) { return; }
    lastFacts = Date.now();
    fetch(facts.getAttribute("data-vm"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (vm) {
        if (!vm) { return; }
        facts.querySelectorAll("[data-field]").forEach(function (el) {
          var f = el.getAttribute("data-field");
          var v = vm[f];
          if (Array.isArray(v)) { v = v.join(", "); }
          el.textContent = v || "";
          if (f === "powerState") { el.className = "badge power power-" + String(v).toLowerCase(); }
        });
      })
      .catch(function () {});
  }

  function streamLog(pre) {
    var src = pre.getAttribute("data-src");
    var state = document.getElementById("job-state");
    var es = new EventSource(src);
    es.addEventListener("log", function (e) {
      refreshFacts(false);
      var line = document.createElement("div");
      var text = e.data;
      var sp = text.indexOf(" ");
      var ts = document.createElement("span");
      ts.className = "ts";
      ts.textContent = text.slice(0, sp + 1);
      line.appendChild(ts);
      var rest = document.createElement("span");
      rest.textContent = text.slice(sp + 1);
      if (/^Warning /.test(rest.textContent) || /=False /.test(rest.textContent)) { rest.className = "warn"; }
      line.appendChild(rest);
      pre.appendChild(line);
      pre.scrollTop = pre.scrollHeight;
    });
    es.addEventListener("end", function (e) {
      es.close();
      var end = {};
      try { end = JSON.parse(e.data); } catch (err) { end = { state: "Unknown" }; }
      var line = document.createElement("div");
      line.className = "end";
      line.textContent = "— job " + end.state + (end.detail ? ": " + end.detail : "");
      pre.appendChild(line);
      pre.scrollTop = pre.scrollHeight;
      if (state) {
        state.textContent = end.state;
        state.className = "badge job-" + String(end.state).toLowerCase();
      }
      refreshFacts(true);
      pre.setAttribute("data-ended", end.state);
    });
  }

  function livePower(table) {
    setInterval(function () {
      fetch("/api/v1/vms", { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (list) {
          if (!list) { return; }
          list.items.forEach(function (vm) {
            var row = table.querySelector('tr[data-vm="' + vm.namespace + "/" + vm.name + '"]');
            if (!row) { return; }
            var p = row.querySelector('[data-field="powerState"]');
            if (p && p.textContent !== vm.powerState) {
              p.textContent = vm.powerState;
              p.className = "badge power power-" + vm.powerState.toLowerCase();
            }
            var ph = row.querySelector('[data-field="phase"]');
            if (ph && ph.textContent !== vm.phase) { ph.textContent = vm.phase; }
          });
        })
        .catch(function () {});
    }, 5000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var pre = document.getElementById("job-log");
    if (pre) { streamLog(pre); }
    var vms = document.querySelector('[data-live="vms"]');
    if (vms) { livePower(vms); }
    document.querySelectorAll(".meter").forEach(function (m) {
      var total = Number(m.getAttribute("data-total")), free = Number(m.getAttribute("data-free"));
      var bar = document.createElement("i");
      bar.style.width = (total > 0 ? Math.round(100 * (total - free) / total) : 0) + "%";
      m.appendChild(bar);
    });
  });
})();
