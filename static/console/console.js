/* Tidepool console behaviour: live pages over websockets, the submission form, confirmations,
 * the log tail and Plotly charts. No framework and no CDN: this file and Plotly's bundle are
 * served by the console itself.
 *
 * Live pages never patch state from a message alone: each (re)connection starts with a
 * snapshot from the server, so a message dropped while disconnected cannot leave the page wrong.
 */
(function () {
  "use strict";

  var indicator = document.getElementById("live-indicator");
  var sockets = [];
  // For people and tests: inspect or drop the live connections (tidepool.live.sockets[0].drop()).
  window.tidepool = { live: { sockets: sockets } };

  function setLiveState(state) {
    if (!indicator) return;
    indicator.dataset.state = state;
    var text = indicator.querySelector(".live-text");
    if (text) text.textContent = state === "live" ? "Live" : state === "denied" ? "Offline" : "Reconnecting…";
  }

  /* A websocket that reconnects with exponential backoff (0.5 s doubling to 30 s, with jitter).
   * handlers.open(isReconnect) runs on every successful connection, handlers.message(data) per message. */
  function liveSocket(path, handlers) {
    var socket = null;
    var failures = 0;
    var connections = 0;
    var retryTimer = null;
    var entry = {
      path: path,
      get socket() { return socket; },
      send: function (message) {
        if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
      },
      // Simulates a dropped connection: the socket closes and the usual reconnect follows.
      drop: function () { if (socket) socket.close(); },
      connections: function () { return connections; },
    };
    function url() {
      return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
    }
    function connect() {
      retryTimer = null;
      setLiveState(connections ? "reconnecting" : "connecting");
      socket = new WebSocket(url());
      socket.addEventListener("open", function () {
        failures = 0;
        connections += 1;
        setLiveState("live");
        if (handlers.open) handlers.open(connections > 1);
      });
      socket.addEventListener("message", function (event) {
        var data;
        try { data = JSON.parse(event.data); } catch (error) { return; }
        handlers.message(data);
      });
      socket.addEventListener("close", function () {
        setLiveState("reconnecting");
        var delay = Math.min(30000, 500 * Math.pow(2, failures)) * (0.75 + Math.random() * 0.5);
        failures += 1;
        if (failures >= 4) checkSession();
        if (!retryTimer) retryTimer = setTimeout(connect, delay);
      });
    }
    sockets.push(entry);
    connect();
    return entry;
  }

  /* After repeated refusals the session may have expired: a reload then lands on the login page. */
  function checkSession() {
    fetch(location.pathname, { method: "HEAD", credentials: "same-origin" }).then(function (response) {
      if (response.redirected && /\/accounts\/login\//.test(response.url)) location.reload();
    }).catch(function () { /* the server is down: keep retrying */ });
  }

  /* <time datetime> in the viewer's time zone. */
  function localizeTimes(root) {
    var today = new Date().toDateString();
    (root || document).querySelectorAll("time[datetime]").forEach(function (node) {
      var date = new Date(node.getAttribute("datetime"));
      if (isNaN(date)) return;
      var time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
      node.textContent = date.toDateString() === today ? time :
        date.toLocaleDateString([], { month: "short", day: "numeric" }) + ", " + time;
      node.title = date.toString();
    });
  }

  /* Plotly figures embedded as JSON next to their <div data-figure>. */
  function drawCharts(root) {
    if (!window.Plotly) return;
    (root || document).querySelectorAll("[data-figure]").forEach(function (div) {
      var source = document.getElementById(div.dataset.figure);
      if (!source) return;
      var figure = JSON.parse(source.textContent);
      var layout = figure.layout || {};
      layout.uirevision = "keep";  // keep zoom and legend choices across live refreshes
      if (div.clientWidth < 560) {
        // Narrow screens: fewer, level time labels, and the legend clear of them.
        layout.xaxis = Object.assign({}, layout.xaxis, { nticks: 4, tickangle: 0 });
        layout.legend = Object.assign({}, layout.legend, { y: -0.3 });
        layout.margin = Object.assign({}, layout.margin, { b: 64 });
      }
      var menus = layout.updatemenus;
      var previous = div.layout && div.layout.updatemenus && div.layout.updatemenus[0];
      if (menus && menus[0] && previous && previous.active > 0 && menus[0].buttons[previous.active]) {
        // Keep the quota the viewer picked from the menu.
        menus[0].active = previous.active;
        var visible = menus[0].buttons[previous.active].args[0].visible;
        figure.data.forEach(function (trace, i) { trace.visible = visible[i]; });
      }
      window.Plotly.react(div, figure.data, layout, {
        responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"],
      });
    });
  }

  /* Buttons marked data-copy="<element id>" copy that element's text to the clipboard. */
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.dataset.copy);
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent).then(function () {
      var label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1500);
    });
  });

  /* Confirmation for links marked data-confirm: a dialog posting to the link's URL.
   * Without the dialog (or JS) the link opens the confirmation page instead. */
  var dialog = document.getElementById("confirm-dialog");
  document.addEventListener("click", function (event) {
    var link = event.target.closest("a[data-confirm]");
    if (!link || !dialog || typeof dialog.showModal !== "function") return;
    event.preventDefault();
    document.getElementById("confirm-text").textContent = link.dataset.confirm;
    document.getElementById("confirm-ok").textContent = link.dataset.confirmLabel || "Confirm";
    var form = document.getElementById("confirm-form");
    form.action = link.href;
    delete form.dataset.submitting;
    form.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
    dialog.showModal();
  });
  if (dialog) {
    document.getElementById("confirm-cancel").addEventListener("click", function () { dialog.close(); });
    document.getElementById("confirm-form").dataset.submitOnce = "";
  }

  /* Submit once: a second click or Enter while the first POST is on its way does nothing.
   * (The job form also carries a token, so even a replayed POST creates one job.) */
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var once = form.hasAttribute("data-submit-once") || form.querySelector("[data-submit-once]");
    if (!once) return;
    if (form.dataset.submitting) { event.preventDefault(); return; }
    form.dataset.submitting = "1";
    // Disable after this event so the browser still sends the form.
    setTimeout(function () {
      form.querySelectorAll("button[type=submit], button:not([type])").forEach(function (button) {
        button.disabled = true;
        button.setAttribute("aria-disabled", "true");
      });
    }, 0);
  }, true);
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;  // back/forward cache: make the restored form usable again
    document.querySelectorAll("form[data-submitting]").forEach(function (form) {
      delete form.dataset.submitting;
      form.querySelectorAll("button").forEach(function (b) { b.disabled = false; b.removeAttribute("aria-disabled"); });
    });
  });

  /* Job list ------------------------------------------------------------------------------ */
  var jobTable = document.getElementById("job-table");
  if (jobTable) {
    var rows = document.getElementById("job-rows");
    var pager = document.getElementById("job-pager");
    liveSocket(jobTable.dataset.live, {
      message: function (message) {
        if (message.type === "snapshot") {
          var before = {};
          rows.querySelectorAll("tr[data-job-id]").forEach(function (tr) { before[tr.dataset.jobId] = tr.outerHTML; });
          rows.innerHTML = message.rows;
          pager.innerHTML = message.pager;
          rows.querySelectorAll("tr[data-job-id]").forEach(function (tr) {
            if (before[tr.dataset.jobId] !== tr.outerHTML) tr.classList.add("flash");
          });
          localizeTimes(rows);
          localizeTimes(pager);
        } else if (message.type === "rows") {
          message.rows.forEach(function (row) {
            var old = rows.querySelector('tr[data-job-id="' + row.id + '"]');
            if (!old) return;
            var holder = document.createElement("tbody");
            holder.innerHTML = row.html;
            var fresh = holder.firstElementChild;
            fresh.classList.add("flash");
            old.replaceWith(fresh);
            localizeTimes(fresh);
          });
        }
      },
    });
  }

  /* Job detail ---------------------------------------------------------------------------- */
  var jobLive = document.getElementById("job-live");
  if (jobLive) {
    liveSocket(jobLive.dataset.live, {
      message: function (message) {
        if (message.type !== "snapshot") return;
        // The events stay open (or closed) as the reader left them across live updates.
        var events = jobLive.querySelector("details.events");
        var eventsOpen = events ? events.open : false;
        jobLive.innerHTML = message.html;
        var fresh = jobLive.querySelector("details.events");
        if (fresh) fresh.open = eventsOpen;
        jobLive.dataset.status = message.status;
        localizeTimes(jobLive);
      },
    });
  }

  /* Log tail: polls the API by byte offset; "latest" follows the newest attempt's rank 0. */
  var logCard = document.getElementById("log");
  if (logCard) {
    var logText = document.getElementById("log-text");
    var logPod = document.getElementById("log-pod");
    var logFollow = document.getElementById("log-follow");
    var logStatus = document.getElementById("log-status");
    var shownPod = null;
    var offset = null;
    var MAX_CHARS = 400000;
    var appendLog = function (text) {
      if (!text) return;
      logText.textContent += text;
      if (logText.textContent.length > MAX_CHARS) {
        logText.textContent = logText.textContent.slice(-MAX_CHARS);
      }
      if (logFollow.checked) logText.scrollTop = logText.scrollHeight;
    };
    var pollLog = function () {
      var params = new URLSearchParams();
      if (logPod.value) params.set("pod", logPod.value);
      else params.set("latest", "1");
      if (shownPod !== null) {
        params.set("shown", shownPod);
        params.set("offset", offset);
      }
      fetch(logCard.dataset.logUrl + "?" + params.toString(), {
        credentials: "same-origin", headers: { Accept: "application/json" },
      }).then(function (response) {
        if (response.status === 503) {
          // The log lives on the pod's node and the node did not answer: say so, keep polling.
          return response.json().then(function (body) {
            logStatus.textContent = body.detail || "The pod's node did not answer.";
            return null;
          });
        }
        return response.ok ? response.json() : null;
      }).then(function (data) {
        if (!data) return;
        if (!data.pod) {
          shownPod = null;
          logText.textContent = "No pod yet: the log appears once the job is admitted.";
          logStatus.textContent = "";
          return;
        }
        if (data.pod.id !== shownPod || data.reset) {
          logText.textContent = "";
          shownPod = data.pod.id;
        }
        appendLog(data.text);
        offset = data.offset;
        logStatus.textContent = data.pod.label + " · attempt " + data.pod.attempt + " · " + data.pod.status +
          (data.pod.node ? " on " + data.pod.node : "");
      }).catch(function () { /* transient: try again on the next tick */ }).finally(function () {
        setTimeout(pollLog, document.hidden ? 5000 : 1500);
      });
    };
    logPod.addEventListener("change", function () { shownPod = null; offset = null; });
    pollLog();
  }

  /* Nodes, quotas, dashboard: a "changed" notice re-fetches the page's live fragment. */
  var clusterLive = document.getElementById("cluster-live");
  if (clusterLive) {
    var fetching = false;
    var again = false;
    var missed = false;
    var refresh = function () {
      if (document.hidden) { missed = true; return; }  // a background tab catches up when shown
      if (fetching) { again = true; return; }
      fetching = true;
      fetch(clusterLive.dataset.fragmentUrl, { credentials: "same-origin" }).then(function (response) {
        if (response.redirected) { location.reload(); return null; }
        return response.ok ? response.text() : null;
      }).then(function (html) {
        if (html === null) return;
        clusterLive.innerHTML = html;
        drawCharts(clusterLive);
        localizeTimes(clusterLive);
      }).catch(function () {}).finally(function () {
        fetching = false;
        if (again) { again = false; refresh(); }
      });
    };
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && missed) { missed = false; refresh(); }
    });
    liveSocket(clusterLive.dataset.live, {
      open: function (isReconnect) { if (isReconnect) refresh(); },
      message: function (message) { if (message.type === "changed") refresh(); },
    });
  }

  /* Submission form ----------------------------------------------------------------------- */
  var jobForm = document.getElementById("job-form");
  if (jobForm) {
    var workspace = jobForm.querySelector("[name=workspace]");
    var roleForms = document.getElementById("role-forms");
    var template = document.getElementById("role-template");
    var total = jobForm.querySelector("[name=roles-TOTAL_FORMS]");

    var selectedModels = function () {
      var checked = jobForm.querySelector(".quota-option input:checked");
      var models = checked && checked.closest(".quota-option").dataset.models;
      return models ? models.split(",") : null;
    };
    var filterModels = function () {
      var models = selectedModels();
      jobForm.querySelectorAll("select[name$='-gpu_type']").forEach(function (select) {
        Array.prototype.forEach.call(select.options, function (option) {
          if (!option.value) return;
          option.hidden = option.disabled = !!models && models.indexOf(option.value) < 0;
        });
        if (select.selectedOptions[0] && select.selectedOptions[0].disabled) select.value = "";
      });
    };
    var filterQuotas = function () {
      var chosen = workspace ? workspace.value : "";
      var shown = [];
      jobForm.querySelectorAll(".quota-option").forEach(function (option) {
        var ok = option.dataset.workspaces.split(",").indexOf(chosen) >= 0;
        option.hidden = !ok;
        if (!ok) option.querySelector("input").checked = false;
        else shown.push(option);
      });
      if (shown.length === 1) shown[0].querySelector("input").checked = true;
      filterModels();
    };
    var renumberRoles = function () {
      var forms = roleForms.querySelectorAll(".role-form");
      forms.forEach(function (fieldset, index) {
        fieldset.querySelectorAll("[name],[id],[for]").forEach(function (node) {
          ["name", "id", "for"].forEach(function (attr) {
            var value = node.getAttribute(attr);
            if (value) node.setAttribute(attr, value.replace(/roles-(\d+|__prefix__)-/, "roles-" + index + "-"));
          });
        });
        fieldset.querySelector("legend").textContent = "Role " + (index + 1);
      });
      total.value = forms.length;
      roleForms.classList.toggle("single", forms.length <= 1);
    };
    document.getElementById("add-role").addEventListener("click", function () {
      var fragment = template.content.cloneNode(true);
      var nameInput = fragment.querySelector("[name$='-name']");
      roleForms.appendChild(fragment);
      renumberRoles();
      filterModels();
      if (nameInput) { nameInput.value = "worker-" + total.value; nameInput.focus(); }
    });
    // A CPU-only role asks no GPU and names no model; unticked, it asks at least one again.
    roleForms.addEventListener("change", function (event) {
      if (!event.target.matches("input[name$='-cpu_only']")) return;
      var role = event.target.closest(".role-form");
      var gpus = role.querySelector("input[name$='-gpus']");
      var model = role.querySelector("select[name$='-gpu_type']");
      if (event.target.checked) {
        gpus.value = "0";
        if (model) model.value = "";
      } else if (gpus.value === "0") {
        gpus.value = "1";
      }
    });
    roleForms.addEventListener("click", function (event) {
      if (!event.target.classList.contains("remove-role")) return;
      event.target.closest(".role-form").remove();
      renumberRoles();
    });
    var idleInputs = jobForm.querySelectorAll("[name=idle_mode]");
    var updateIdle = function () {
      var checked = jobForm.querySelector("[name=idle_mode]:checked");
      jobForm.dataset.idle = checked ? checked.value : "off";
    };
    idleInputs.forEach(function (input) { input.addEventListener("change", updateIdle); });
    if (workspace) workspace.addEventListener("change", filterQuotas);
    jobForm.querySelectorAll(".quota-option input").forEach(function (input) {
      input.addEventListener("change", filterModels);
    });
    renumberRoles();
    filterQuotas();
    updateIdle();
    // A refused form: the first field with an error (in page order; the roles' own refusals count
    // as their section) gets the focus and is scrolled to the middle of the screen.
    var firstError = jobForm.querySelector(".has-error, #roles > .error");
    if (firstError) {
      var control = firstError.matches("#roles > .error") ?
        firstError.closest("#roles").querySelector("input:not([type=hidden]), select") :
        firstError.querySelector("input:checked, input:not([type=hidden]):not([hidden]), select, textarea");
      if (control) control.focus({ preventScroll: true });
      firstError.scrollIntoView({ block: "center" });
    }
  }

  localizeTimes(document);
  drawCharts(document);
})();
