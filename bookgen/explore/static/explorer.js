// bookgen explorer: follow moves in place (URL and history follow), sort tables,
// expand the tree, refresh the live view. Plain script, no build step; the pages work without it.
"use strict";

(function () {
  const main = () => document.getElementById("main");

  function isPositionUrl(url) {
    return url.origin === location.origin && url.pathname === "/";
  }

  async function show(href, push) {
    const url = new URL(href, location.href);
    let response;
    try {
      response = await fetch(url.pathname + url.search, {headers: {"X-Explorer-Part": "main"}});
    } catch (error) {
      location.href = url.href;
      return;
    }
    if (!response.ok) {   // a 400 page: show it whole
      location.href = url.href;
      return;
    }
    main().innerHTML = await response.text();
    if (push) {
      history.pushState({explorer: true}, "", url.pathname + url.search);
    }
    const sfen = document.getElementById("sfen");
    if (sfen) {
      document.title = sfen.textContent + " \u2014 bookgen explorer";
    }
    setUp(main());
  }

  function sortTable(table, column, header) {
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    const ascending = header.dataset.order !== "asc";
    for (const th of table.tHead.rows[0].cells) {
      delete th.dataset.order;
    }
    header.dataset.order = ascending ? "asc" : "desc";
    const key = (row) => {
      const cell = row.cells[column];
      const text = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent;
      const number = parseFloat(text);
      return text === "" ? null : (isNaN(number) ? text : number);
    };
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === null || y === null) {
        return (x === null) - (y === null);   // empty cells last either way
      }
      const order = typeof x === "number" && typeof y === "number" ? x - y
        : String(x).localeCompare(String(y));
      return ascending ? order : -order;
    });
    for (const row of rows) {
      body.appendChild(row);
    }
  }

  function treeList(nodes) {
    const list = document.createElement("ul");
    for (const node of nodes) {
      const item = document.createElement("li");
      item.dataset.move = node.move;
      if (node.tree) {
        const button = document.createElement("button");
        button.className = "expand";
        button.dataset.tree = node.tree;
        button.setAttribute("aria-label", "expand");
        button.textContent = "+";
        item.appendChild(button);
      } else {
        const leaf = document.createElement("span");
        leaf.className = "leaf";
        leaf.textContent = "\u00b7";
        item.appendChild(leaf);
      }
      const link = document.createElement("a");
      link.href = node.url;
      link.dataset.nav = "";
      link.textContent = node.move;
      item.appendChild(link);
      const value = document.createElement("span");
      value.className = "v";
      value.textContent = " " + (node.value === null ? "\u2014" : node.value);
      item.appendChild(value);
      const count = document.createElement("span");
      count.className = "c";
      count.textContent = " (" + node.count + ")";
      item.appendChild(count);
      list.appendChild(item);
    }
    return list;
  }

  async function toggle(button) {
    const item = button.parentElement;
    const open = item.querySelector(":scope > ul");
    if (open) {
      open.hidden = !open.hidden;
      button.textContent = open.hidden ? "+" : "\u2212";
      return;
    }
    button.disabled = true;
    const response = await fetch(button.dataset.tree);
    button.disabled = false;
    if (!response.ok) {
      return;
    }
    const data = await response.json();
    item.appendChild(treeList(data.nodes));
    button.textContent = "\u2212";
    item.classList.add("expanded");
  }

  // -- moves clicked on the board: a piece (or a piece in hand), then its square --------

  let selected = null;   // {from: "7g"} or {drop: "P"}, with the box drawn around it

  function boardPoint(svg, event) {
    const point = svg.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    return point.matrixTransform(svg.getScreenCTM().inverse());
  }

  function squareBox(svg, square) {
    const cell = +svg.dataset.cell;
    const file = "987654321".indexOf(square[0]), rank = "abcdefghi".indexOf(square[1]);
    return [+svg.dataset.left + file * cell, +svg.dataset.top + rank * cell, cell, cell];
  }

  function squareAt(svg, p) {
    const cell = +svg.dataset.cell;
    const file = Math.floor((p.x - svg.dataset.left) / cell);
    const rank = Math.floor((p.y - svg.dataset.top) / cell);
    if (file < 0 || file > 8 || rank < 0 || rank > 8) {
      return null;
    }
    return "987654321"[file] + "abcdefghi"[rank];
  }

  function handAt(svg, p) {
    const hands = JSON.parse(svg.dataset.hands || "{}");
    for (const [letter, [x, y, w, h]] of Object.entries(hands)) {
      if (p.x >= x && p.x < x + w && p.y >= y && p.y < y + h) {
        return letter;
      }
    }
    return null;
  }

  function select(svg, choice, box) {
    for (const old of svg.querySelectorAll("rect.selected")) {
      old.remove();
    }
    selected = choice;
    if (choice) {
      const rect = document.createElementNS("http://www.w3.org/2000/svg", "rect");
      rect.setAttribute("class", "selected");
      ["x", "y", "width", "height"].forEach((name, i) => rect.setAttribute(name, box[i]));
      svg.appendChild(rect);
    }
  }

  function play(svg, move) {
    const url = new URL(svg.dataset.url, location.href);
    const moves = url.searchParams.get("moves");
    url.searchParams.set("moves", moves ? moves + " " + move : move);
    selected = null;
    show(url.pathname + url.search, true);
  }

  function boardClick(svg, event) {
    const p = boardPoint(svg, event);
    const legal = (svg.dataset.legal || "").split(" ").filter(Boolean);
    const square = squareAt(svg, p);
    if (selected && square) {
      const prefix = selected.drop ? selected.drop + "*" + square : selected.from + square;
      const candidates = legal.filter((m) => m === prefix || m === prefix + "+");
      if (candidates.length === 1) {
        play(svg, candidates[0]);
        return;
      }
      if (candidates.length === 2) {
        play(svg, window.confirm("Promote?") ? prefix + "+" : prefix);
        return;
      }
    }
    if (square && legal.some((m) => m.startsWith(square))) {
      select(svg, {from: square}, squareBox(svg, square));
      return;
    }
    const drop = square ? null : handAt(svg, p);
    if (drop && legal.some((m) => m.startsWith(drop + "*"))) {
      select(svg, {drop: drop}, JSON.parse(svg.dataset.hands)[drop]);
      return;
    }
    select(svg, null);
  }

  function setUp(root) {
    for (const table of root.querySelectorAll("table.sortable")) {
      if (!table.tHead) {
        continue;
      }
      Array.from(table.tHead.rows[0].cells).forEach((th, column) => {
        th.addEventListener("click", () => sortTable(table, column, th));
      });
    }
  }

  document.addEventListener("click", (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) {
      return;
    }
    const expand = event.target.closest("button.expand");
    if (expand) {
      event.preventDefault();
      toggle(expand);
      return;
    }
    const arrow = event.target.closest("svg.board g.arrow");
    if (arrow) {   // an arrow on the board: play its move (the move table links it)
      const row = document.querySelector(
        `#moves tr[data-move="${CSS.escape(arrow.dataset.move)}"] a[data-nav]`);
      if (row) {
        event.preventDefault();
        show(row.href, true);
      }
      return;
    }
    const board = event.target.closest("svg.board");
    if (board) {
      boardClick(board, event);
      return;
    }
    const link = event.target.closest("a[data-nav]");
    if (link && isPositionUrl(new URL(link.href))) {
      event.preventDefault();
      show(link.href, true);
    }
  });

  document.addEventListener("keydown", (event) => {   // left and right walk the line
    if (event.target.closest("input, textarea, select") || event.altKey || event.ctrlKey
        || event.metaKey) {
      return;
    }
    const selector = {ArrowLeft: ".nav a.back", ArrowRight: ".nav a.forward"}[event.key];
    const link = selector ? document.querySelector(selector) : null;
    if (link) {
      event.preventDefault();
      show(link.href, true);
    }
  });

  window.addEventListener("popstate", () => {
    if (isPositionUrl(new URL(location.href))) {
      show(location.href, false);
    }
  });

  // The live view (/live): its main part is fetched again every data-refresh seconds.
  async function refreshLive() {
    const live = document.getElementById("live");
    if (!live) {
      return;
    }
    try {
      const response = await fetch(location.pathname + location.search,
                                   {headers: {"X-Explorer-Part": "main"}});
      if (response.ok) {
        main().innerHTML = await response.text();
        setUp(main());
      }
    } catch (error) {
      // the server is gone or restarting: try again at the next tick
    }
    scheduleLive();
  }

  function scheduleLive() {
    const live = document.getElementById("live");
    if (live) {
      window.setTimeout(refreshLive, 1000 * (parseFloat(live.dataset.refresh) || 2));
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (isPositionUrl(new URL(location.href))) {
      history.replaceState({explorer: true}, "", location.pathname + location.search);
    }
    setUp(document);
    scheduleLive();
  });
})();
