/* np_flamegraph.c -- a self-contained interactive SVG flame graph.
 *
 * Stacks are merged into a tree from the root; each node is a rectangle
 * whose width is its share of the chosen counter, callers below callees
 * (root at the bottom). Siblings are ordered by name, as flamegraph.pl
 * does, so the picture is stable from run to run.
 *
 * Each frame is <g class="f"> holding a <title> (the browser's native
 * tooltip: name, bytes and objects), the <rect> and a <text> label. The
 * embedded script adds a details line on hover, click-to-zoom on a frame
 * (and "Reset zoom"; "file.svg#zoom=NAME" opens zoomed on the first frame
 * called NAME), and re-fits the labels with the browser's real font
 * metrics. Without script the file still renders, with labels fitted by a
 * character-width estimate. */
#include <stdlib.h>
#include <string.h>

#include "np_report.h"

typedef struct np_fnode {
  uint32_t key;        /* function (or line) key */
  uint32_t parent, child, next; /* indices; UINT32_MAX = none */
  double v[NP_NCOUNTERS];
} np_fnode;

typedef struct np_ftree {
  np_fnode *n;
  size_t count, cap;
  np_intern keys;
  np_intern edge; /* (parent, key) -> node */
  int depth;
} np_ftree;

static uint32_t np_fchild(np_ftree *t, uint32_t parent, uint32_t key) {
  uint32_t pk[2] = {parent, key};
  uint32_t id = np_intern_bytes(&t->edge, pk, sizeof pk);
  if (id + 1 < t->count) return id + 1; /* node 0 is the root */
  np_fnode *n = NP_PUSH(t->n, t->count, t->cap);
  memset(n, 0, sizeof *n);
  n->key = key;
  n->parent = parent;
  n->child = UINT32_MAX;
  /* Insert among siblings sorted by name. */
  uint32_t me = (uint32_t)(t->count - 1);
  const char *name = np_intern_key(&t->keys, key);
  uint32_t *link = &t->n[parent].child;
  while (*link != UINT32_MAX &&
         strcmp(np_intern_key(&t->keys, t->n[*link].key), name) < 0)
    link = &t->n[*link].next;
  t->n[me].next = *link;
  *link = me;
  return me;
}

/* Deterministic warm colour from the name (flamegraph.pl's "hot" palette);
 * unsymbolized placeholder frames are grey so they stand out. */
static void np_color(const char *name, char *out, size_t n) {
  if (strstr(name, "+0x") || strncmp(name, "0x", 2) == 0 || name[0] == '[') {
    snprintf(out, n, "rgb(180,180,180)");
    return;
  }
  uint64_t h = np_hash(name, strlen(name));
  unsigned r = 205 + (unsigned)(h % 50), g = (unsigned)((h >> 8) % 230),
           b = (unsigned)((h >> 16) % 55);
  snprintf(out, n, "rgb(%u,%u,%u)", r, g, b);
}

#define NP_W 1200.0
#define NP_PAD 10.0
#define NP_FH 16.0
#define NP_CHW 7.2 /* estimated width of a 12px monospace character */
#define NP_HINT "Hover over a frame for its bytes and objects; click to zoom."

static void np_fit_label(np_buf *b, const char *name, double w) {
  size_t fit = w > 6 ? (size_t)((w - 6) / NP_CHW) : 0;
  size_t len = strlen(name);
  if (fit >= len) {
    np_buf_put_xml(b, name);
  } else if (fit >= 3) {
    char *t = np_xstrndup(name, fit - 2);
    np_buf_put_xml(b, t);
    np_buf_puts(b, "..");
    free(t);
  }
}

static const char np_script[] =
    "<script type=\"text/ecmascript\"><![CDATA[\n"
    "'use strict';\n"
    "var W=%g, PAD=%g, svg=document.documentElement, frames=[], chw=%g;\n"
    "var details=document.getElementById('details');\n"
    "function fit(g,w){var t=g.querySelector('text'),n=g.getAttribute('data-name');\n"
    "  var k=Math.floor((w-6)/chw); t.textContent=k>=n.length?n:(k>=3?n.substr(0,k-2)+'..':'');}\n"
    "function show(g){details.textContent=g.getAttribute('data-info');}\n"
    "function zoom(g){var x0=+g.getAttribute('data-x'),w0=+g.getAttribute('data-w'),\n"
    "  d0=+g.getAttribute('data-d'),s=(W-2*PAD)/w0;\n"
    "  frames.forEach(function(f){var x=+f.getAttribute('data-x'),w=+f.getAttribute('data-w'),\n"
    "    d=+f.getAttribute('data-d'),r=f.querySelector('rect'),t=f.querySelector('text');\n"
    "    var inside=x>=x0-1e-6&&x+w<=x0+w0+1e-6, below=d<d0&&x<=x0+1e-6&&x+w>=x0+w0-1e-6;\n"
    "    if(!(inside||below)){f.style.display='none';return;}\n"
    "    f.style.display='';var nx=below?PAD:PAD+(x-x0)*s,nw=below?W-2*PAD:w*s;\n"
    "    r.setAttribute('x',nx);r.setAttribute('width',nw);t.setAttribute('x',nx+3);fit(f,nw);});\n"
    "  document.getElementById('unzoom').style.opacity=1;}\n"
    "function unzoom(){frames.forEach(function(f){var x=+f.getAttribute('data-x'),\n"
    "    w=+f.getAttribute('data-w'),r=f.querySelector('rect'),t=f.querySelector('text');\n"
    "    f.style.display='';r.setAttribute('x',PAD+x);r.setAttribute('width',w);\n"
    "    t.setAttribute('x',PAD+x+3);fit(f,w);});\n"
    "  document.getElementById('unzoom').style.opacity=0.3;}\n"
    "frames=Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
    "var probe=document.getElementById('probe');\n"
    "if(probe&&probe.getComputedTextLength){var L=probe.getComputedTextLength();\n"
    "  if(L>0)chw=L/probe.textContent.length;}\n"
    "frames.forEach(function(g){g.addEventListener('mouseover',function(){show(g);});\n"
    "  g.addEventListener('mouseout',function(){details.textContent='" NP_HINT "';});\n"
    "  g.addEventListener('click',function(){zoom(g);});\n"
    "  fit(g,+g.getAttribute('data-w'));});\n"
    "document.getElementById('unzoom').addEventListener('click',unzoom);\n"
    "var m=/^#zoom=(.+)$/.exec(location.hash);\n"
    "if(m){var want=decodeURIComponent(m[1]);frames.some(function(g){\n"
    "  if(g.getAttribute('data-name')===want){zoom(g);return true;}return false;});}\n"
    "svg.setAttribute('data-np-ready',String(frames.length));\n"
    "]]></script>\n";

int np_report_flamegraph(const np_view *v, const np_ropts *o) {
  int c = o->counter;
  /* The pair shown on hover: inuse or alloc, matching the chosen counter. */
  int cs = c >= NP_ALLOC_OBJECTS ? NP_ALLOC_SPACE : NP_INUSE_SPACE;
  int co = cs - 1;
  np_ftree t = {0};
  np_fnode *root = NP_PUSH(t.n, t.count, t.cap);
  memset(root, 0, sizeof *root);
  root->parent = root->child = root->next = UINT32_MAX;
  root->key = np_intern_str(&t.keys, "all");
  uint32_t *fr = NULL;
  size_t capfr = 0;
  for (size_t i = 0; i < v->nstacks; i++) {
    const np_stack *s = &v->stacks[i];
    if (s->v[c] <= 0) continue;
    size_t n = np_view_stack_frames(v, s, &fr, &capfr);
    uint32_t node = 0;
    for (int k = 0; k < NP_NCOUNTERS; k++) t.n[0].v[k] += s->v[k];
    for (size_t k = n; k-- > 0;) {
      uint32_t key = np_frame_key(v, fr[k], o->lines, &t.keys);
      node = np_fchild(&t, node, key);
      for (int z = 0; z < NP_NCOUNTERS; z++) t.n[node].v[z] += s->v[z];
      if ((int)(n - k) > t.depth) t.depth = (int)(n - k);
    }
  }
  free(fr);

  double total = t.n[0].v[c];
  double height = (t.depth + 1) * NP_FH + 70;
  np_buf b = {0};
  np_buf_printf(&b,
                "<?xml version=\"1.0\" standalone=\"no\"?>\n"
                "<svg version=\"1.1\" width=\"%g\" height=\"%g\" "
                "viewBox=\"0 0 %g %g\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                NP_W, height, NP_W, height);
  np_buf_puts(&b,
              "<style>text{font-family:monospace;font-size:12px;fill:#000}"
              "g.f:hover rect{stroke:#000;stroke-width:0.5;cursor:pointer}"
              "#title{font-size:16px;text-anchor:middle}"
              "#unzoom{cursor:pointer;opacity:0.3}</style>\n");
  np_buf_printf(&b,
                "<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" "
                "fill=\"#f8f8f0\"/>\n",
                NP_W, height);
  np_buf_printf(&b, "<text id=\"title\" x=\"%g\" y=\"24\">", NP_W / 2);
  if (o->title) {
    np_buf_put_xml(&b, o->title);
  } else {
    np_buf_puts(&b, "Heap flame graph: ");
    np_buf_puts(&b, np_counter_names[c]);
  }
  np_buf_printf(&b, " (total %lld %s)</text>\n", np_round(total),
                np_unit(c));
  np_buf_printf(&b, "<text id=\"unzoom\" x=\"%g\" y=\"24\">Reset zoom</text>\n",
                NP_PAD);
  np_buf_printf(&b,
                "<text id=\"details\" x=\"%g\" y=\"%g\">" NP_HINT "</text>\n"
                "<text id=\"probe\" x=\"-1000\" y=\"-1000\">"
                "mmmmmmmmmmmmmmmmmmmm</text>\n",
                NP_PAD, height - 12);

  /* Depth-first layout; x in pixels relative to PAD. */
  typedef struct { uint32_t node; double x; int depth; } np_item;
  np_item *st = NULL;
  size_t nst = 0, capst = 0;
  if (total > 0) {
    np_item *it = NP_PUSH(st, nst, capst);
    it->node = 0, it->x = 0, it->depth = 0;
  }
  double scale = total > 0 ? (NP_W - 2 * NP_PAD) / total : 0;
  char color[32];
  while (nst) {
    np_item it = st[--nst];
    const np_fnode *n = &t.n[it.node];
    double w = n->v[c] * scale;
    if (w < 0.1) continue; /* too thin to see; its share stays in parent */
    const char *name = np_intern_key(&t.keys, n->key);
    double y = height - 40 - (it.depth + 1) * NP_FH;
    char info[512];
    snprintf(info, sizeof info, "%s: %lld B, %lld objects (%.2f%% of %s)",
             name, np_round(n->v[cs]), np_round(n->v[co]),
             100.0 * n->v[c] / total, np_counter_names[c]);
    np_buf_puts(&b, "<g class=\"f\" data-name=\"");
    np_buf_put_xml(&b, name);
    np_buf_printf(&b, "\" data-x=\"%.2f\" data-w=\"%.2f\" data-d=\"%d\" "
                      "data-info=\"", it.x, w, it.depth);
    np_buf_put_xml(&b, info);
    np_buf_puts(&b, "\"><title>");
    np_buf_put_xml(&b, name);
    np_buf_printf(&b, "\n%s: %lld B (%.2f%%)\n%s: %lld objects",
                  np_counter_names[cs], np_round(n->v[cs]),
                  v->total[cs] > 0 ? 100.0 * n->v[cs] / v->total[cs] : 0.0,
                  np_counter_names[co], np_round(n->v[co]));
    np_buf_puts(&b, "</title>");
    np_color(name, color, sizeof color);
    np_buf_printf(&b,
                  "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%g\" "
                  "fill=\"%s\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
                  NP_PAD + it.x, y, w, NP_FH - 1, color, NP_PAD + it.x + 3,
                  y + 11.5);
    np_fit_label(&b, name, w);
    np_buf_puts(&b, "</text></g>\n");
    /* Push children in reverse so they are laid out left to right. */
    size_t first = nst;
    double cx = it.x;
    for (uint32_t ch = n->child; ch != UINT32_MAX; ch = t.n[ch].next) {
      np_item *ci = NP_PUSH(st, nst, capst);
      ci->node = ch, ci->x = cx, ci->depth = it.depth + 1;
      cx += t.n[ch].v[c] > 0 ? t.n[ch].v[c] * scale : 0;
    }
    for (size_t a = first, z = nst; a + 1 < z; a++, z--) {
      np_item tmp = st[a];
      st[a] = st[z - 1];
      st[z - 1] = tmp;
    }
  }
  free(st);
  np_buf_printf(&b, np_script, NP_W, NP_PAD, NP_CHW);
  np_buf_puts(&b, "</svg>\n");
  size_t wrote = fwrite(b.data, 1, b.len, o->out);
  int rc = wrote == b.len ? 0 : -1;
  np_buf_free(&b);
  free(t.n);
  np_intern_free(&t.keys);
  np_intern_free(&t.edge);
  return rc;
}
