// The lab's one JupyterLab extension, written without a build step.
//
// What it does: a code exercise's check (ipu_emulator/code_exercises/cell_runs.py) must not judge
// the function an earlier run of the exercise cell defined when the learner has edited the cell
// since.  The kernel never sees the editor, so this extension tells it: the kernel opens a comm
// with the target below, and each time a cell of that notebook is about to run, the extension
// sends the code of every code cell edited since its last report.  The report goes out on the
// shell channel before the run's own request, so the kernel has it when the check runs.
//
// How it loads: JupyterLab (4.x) loads a prebuilt extension's `static/remoteEntry.js` (named by
// package.json's `jupyterlab._build.load`), then calls `init(shareScope)` and `get("./extension")`
// on `window._JUPYTERLAB[<package name>]`: the module-federation container that
// @jupyterlab/builder would emit.  Written by hand, it is a page of plain JavaScript with no
// node toolchain to install; the one module it needs, @jupyterlab/notebook, comes from the share
// scope JupyterLab passes to `init`.  tests/browser/test_cell_edits.py runs it in JupyterLab.
var _JUPYTERLAB;
(function () {
  "use strict";
  var NAME = "ipu-lab-cell-edits";
  var TARGET = "ipu_lab_cell_edits";   // cell_runs.EDITS_TARGET
  var shareScope = null;

  function newerVersion(a, b) {
    var x = a.split(/[.+-]/).map(Number), y = b.split(/[.+-]/).map(Number);
    for (var i = 0; i < Math.max(x.length, y.length); i++) {
      if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) > (y[i] || 0) ? a : b;
    }
    return a;
  }

  // A shared module as webpack's consumer takes it: the newest version, marked loaded.
  function sharedModule(name) {
    var versions = shareScope && shareScope[name];
    if (!versions) return Promise.reject(new Error(NAME + ": JupyterLab shares no " + name));
    var entry = versions[Object.keys(versions).reduce(newerVersion)];
    entry.loaded = 1;
    return Promise.resolve(entry.get()).then(function (factory) { return factory(); });
  }

  function codeCells(panel) {
    var found = [];
    var cells = panel.content.model ? panel.content.model.cells : [];
    for (var i = 0; i < cells.length; i++) {
      var cell = cells.get(i);
      if (cell.type === "code") found.push([cell.id, cell.sharedModel.getSource()]);
    }
    return found;
  }

  function plugin(notebook) {
    return {
      id: NAME + ":plugin",
      description: "Tells the kernel which code cells were edited since they last ran.",
      autoStart: true,
      requires: [notebook.INotebookTracker],
      activate: function (app, tracker) {
        var channels = new WeakMap();   // kernel connection -> {comm, reported: cell id -> code}
        var listening = new WeakSet();  // kernel connections with the comm target registered

        function panelsOf(kernel) {
          return tracker.filter(function (panel) {
            var session = panel.sessionContext.session;
            return session && session.kernel === kernel;
          });
        }

        // The code of every cell edited since the last report to this kernel (all of them
        // the first time), and the report noted as sent.
        function editedCells(kernel, channel) {
          var edited = {}, count = 0;
          panelsOf(kernel).slice(0, 1).forEach(function (panel) {
            codeCells(panel).forEach(function (pair) {
              if (channel.reported.get(pair[0]) !== pair[1]) {
                edited[pair[0]] = pair[1];
                channel.reported.set(pair[0], pair[1]);
                count++;
              }
            });
          });
          return count ? edited : null;
        }

        function keep(kernel, comm) {
          var channel = { comm: comm, reported: new Map() };
          channels.set(kernel, channel);
          comm.onClose = function () {
            if (channels.get(kernel) === channel) channels.delete(kernel);
          };
          return channel;
        }

        function listen(kernel) {
          if (!kernel || listening.has(kernel)) return;
          listening.add(kernel);
          // The kernel opens the comm when the exercises' code is imported (cell_runs.install).
          kernel.registerCommTarget(TARGET, function (comm) {
            var channel = keep(kernel, comm);
            comm.send({ cells: editedCells(kernel, channel) || {} });
          });
          // A page (re)loaded while that kernel runs: it opened its comm for an earlier page,
          // so open one from here if the kernel holds one.
          kernel.requestCommInfo({ target_name: TARGET }).then(function (reply) {
            var comms = (reply.content && reply.content.comms) || {};
            if (!Object.keys(comms).length || channels.has(kernel)) return;
            var comm = kernel.createComm(TARGET);
            var channel = keep(kernel, comm);
            comm.open({ cells: editedCells(kernel, channel) || {} });
          }).catch(function () { /* a kernel gone or restarting: its next import opens one */ });
        }

        tracker.widgetAdded.connect(function (_, panel) {
          var context = panel.sessionContext;
          context.kernelChanged.connect(function (_, change) { listen(change.newValue); });
          context.ready.then(function () {
            listen(context.session && context.session.kernel);
          });
        });

        notebook.NotebookActions.executionScheduled.connect(function (_, args) {
          var panel = tracker.find(function (p) { return p.content === args.notebook; });
          var session = panel && panel.sessionContext.session;
          var kernel = session && session.kernel;
          var channel = kernel && channels.get(kernel);
          if (!channel) return;
          if (channel.comm.isDisposed) { channels.delete(kernel); return; }
          var edited = editedCells(kernel, channel);
          if (edited) channel.comm.send({ cells: edited });
        });
      }
    };
  }

  var container = {
    init: function (scope) { shareScope = scope; },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error(NAME + " has no module " + module));
      }
      return sharedModule("@jupyterlab/notebook").then(function (notebook) {
        return function () { return { __esModule: true, default: plugin(notebook) }; };
      });
    }
  };
  (_JUPYTERLAB = _JUPYTERLAB === undefined ? {} : _JUPYTERLAB)[NAME] = container;
})();
