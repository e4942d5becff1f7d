"""The HTML report's time axis: a zoomable timeline, availability per partition and each
topic's story, as one self-contained section (inline SVG, CSS and script; no network).

The rule: the page carries the events, not their pixels. Each event is an SVG `rect` of
class `ev` and its kind (`fault`, `election`, `fenced`, `leaderless`, `isr`, `topic`)
with its times (`data-t0`, `data-t1` for a span, ms since the epoch) and its lane's row;
the script places them for the window shown (wheel or buttons zoom, dragging pans) and
draws the ticks. A topic event, and each row of the topics table, names its topic
(`data-topic`); clicking one shows that topic's `topic_lifecycle` rows, embedded as JSON
(`#topic-stories`). Lanes hold at most MAX_PER_LANE events and the topics table
MAX_TOPICS topics (the first ones; the page says how many were left out). Pure:
`tools.replay.time_axis` chooses the events.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from itertools import islice
from typing import Any

from tools.replay.time_axis import Axis, Event, topic_stories
from tools.replay.timeline import Timeline

MAX_PER_LANE = 3000
MAX_AVAILABILITY_ROWS = 300
MAX_TOPICS = 2000  # the topics table and the stories the page embeds
LABEL_WIDTH, WIDTH, LANE_HEIGHT, AXIS_HEIGHT = 150, 1000, 22, 28

STYLE = """#axis-svg{width:100%;border:1px solid #ccc;cursor:grab;user-select:none;
background:#fff}#axis-svg text{font-size:11px;fill:#333}.lane-bg{fill:#f7f7f7}
.ev{cursor:pointer}.ev.fault{fill:#d62728;fill-opacity:.35}.ev.election{fill:#1f77b4}
.ev.fenced{fill:#ff7f0e;fill-opacity:.7}.ev.leaderless{fill:#7f0000;fill-opacity:.6}
.ev.isr[data-detail=shrink]{fill:#9467bd}.ev.isr[data-detail=expand]{fill:#2ca02c}
.ev.topic{fill:#17becf}.ev.topic[data-detail=delete]{fill:#555}
.ev.topic[data-detail=resize]{fill:#e377c2}.tick{stroke:#ddd}
.axis-controls button{margin-right:.3em}#axis-info{min-height:1.2em;font-size:small}
tr.topic{cursor:pointer}tr.topic:hover,tr.topic.chosen{background:#eef}
.bar{display:inline-block;height:.7em;background:#7f0000;vertical-align:middle}
.bar.ur{background:#9467bd}.bar.mi{background:#d62728}.note{font-size:small;color:#555}"""

SCRIPT = """(function(){
const svg=document.getElementById('axis-svg');
const start=svg?+svg.dataset.start:0,end=svg?Math.max(+svg.dataset.end,start+1):1;
function rel(t){const s=(t-start)/1000;return '+'+(Math.abs(s)<10?s.toFixed(2):s.toFixed(1))+' s';}
const stories=JSON.parse(document.getElementById('topic-stories').textContent);
function cell(v){const td=document.createElement('td');
 td.textContent=v===null?'':String(v);return td;}
function showStory(id){const rows=stories[id]||[],box=document.getElementById('story');
 box.innerHTML='';const h=document.createElement('h3');
 h.textContent='Topic '+[...new Set(rows.map(r=>r.name))].join(' / ')+' ('+id+')';box.append(h);
 const t=document.createElement('table');t.className='story';
 const head=document.createElement('tr');
 for(const c of ['at','offset','epoch','event','name','partitions','config','new name']){
  const th=document.createElement('th');th.textContent=c;head.append(th);}t.append(head);
 for(const r of rows){const tr=document.createElement('tr');tr.className='story-row';
  tr.append(cell(r.time_ms===null?'(no time)':rel(r.time_ms)),cell(r.offset),cell(r.epoch),
   cell(r.event),cell(r.name),cell(r.partitions),
   cell(r.config_key===null?null:r.config_key+'='+r.config_value),cell(r.new_name));t.append(tr);}
 box.append(t);
 for(const tr of document.querySelectorAll('tr.topic'))
  tr.classList.toggle('chosen',tr.dataset.topic===id);}
for(const tr of document.querySelectorAll('tr.topic'))
 tr.addEventListener('click',()=>showStory(tr.dataset.topic));
if(!svg)return;
const L=+svg.dataset.label,W=+svg.dataset.width,H=+svg.dataset.height;
const evs=[...svg.querySelectorAll('.ev')],ticks=document.getElementById('axis-ticks');
const shown=document.getElementById('axis-window'),info=document.getElementById('axis-info');
let v0=start,v1=end;
function x(t){return L+(t-v0)*(W-L)/(v1-v0);}
function step(span){const raw=span/8,k=Math.pow(10,Math.floor(Math.log10(raw)));
 for(const m of [1,2,5,10])if(m*k>=raw)return m*k;return 10*k;}
function draw(){
 for(const e of evs){const a=x(+e.dataset.t0);
  const b=e.dataset.t1===undefined?a+2:Math.max(x(+e.dataset.t1),a+1);
  e.setAttribute('x',a.toFixed(1));e.setAttribute('width',(b-a).toFixed(1));}
 const s=step(v1-v0);let out='';
 for(let t=Math.ceil((v0-start)/s)*s+start;t<=v1;t+=s){const p=x(t);
  out+=`<line class="tick" x1="${p}" x2="${p}" y1="0" y2="${H-16}"/>`+
   `<text x="${Math.max(p,L+16)}" y="${H-4}" text-anchor="middle">${rel(t)}</text>`;}
 ticks.innerHTML=out;
 shown.textContent=`showing ${rel(v0)} to ${rel(v1)} of ${rel(end)} (`+
  new Date(v0).toISOString()+' to '+new Date(v1).toISOString()+')';}
function zoom(f,at){const w=Math.min(end-start,Math.max(50,(v1-v0)*f));
 const c=at===undefined?(v0+v1)/2:at;let a=c-(c-v0)*w/(v1-v0);
 a=Math.min(Math.max(a,start),end-w);v0=a;v1=a+w;draw();}
function timeAt(ev){const r=svg.getBoundingClientRect();
 return v0+((ev.clientX-r.left)*W/r.width-L)*(v1-v0)/(W-L);}
svg.addEventListener('wheel',ev=>{ev.preventDefault();
 zoom(ev.deltaY<0?0.8:1.25,timeAt(ev));},{passive:false});
let drag=null;
svg.addEventListener('mousedown',ev=>{drag={x:ev.clientX,v0:v0,v1:v1,moved:false};});
window.addEventListener('mousemove',ev=>{if(!drag)return;const r=svg.getBoundingClientRect();
 const dt=(ev.clientX-drag.x)*W/r.width*(drag.v1-drag.v0)/(W-L);
 if(Math.abs(ev.clientX-drag.x)>3)drag.moved=true;
 const w=drag.v1-drag.v0;v0=Math.min(Math.max(drag.v0-dt,start),end-w);v1=v0+w;draw();});
window.addEventListener('mouseup',()=>{setTimeout(()=>{drag=null;},0);});
svg.addEventListener('click',ev=>{if(drag&&drag.moved)return;const e=ev.target.closest('.ev');
 if(!e)return;info.textContent=rel(+e.dataset.t0)+': '+e.dataset.label;
 if(e.dataset.topic)showStory(e.dataset.topic);});
document.getElementById('zoom-in').onclick=()=>zoom(0.5);
document.getElementById('zoom-out').onclick=()=>zoom(2);
document.getElementById('zoom-reset').onclick=()=>{v0=start;v1=end;draw();};
draw();})();"""


def _event_rect(event: Event, row: int) -> str:
    attributes = {"class": f"ev {event.kind}", "data-t0": event.start_ms,
                  "data-t1": event.end_ms, "data-label": event.label,
                  "data-topic": event.topic, "data-detail": event.detail,
                  "y": AXIS_HEIGHT // 2 + row * LANE_HEIGHT + 3, "height": LANE_HEIGHT - 6}
    text = " ".join(f'{name}="{html.escape(str(value))}"'
                    for name, value in attributes.items() if value is not None)
    return f"<rect {text}><title>{html.escape(event.label)}</title></rect>"


def _timeline_svg(axis: Axis) -> str:
    height = len(axis.lanes) * LANE_HEIGHT + AXIS_HEIGHT
    rows = {lane: index for index, lane in enumerate(axis.lanes)}
    kept: dict[str, int] = {}
    rects = []
    for event in axis.events:
        kept[event.lane] = kept.get(event.lane, 0) + 1
        if kept[event.lane] <= MAX_PER_LANE:
            rects.append(_event_rect(event, rows[event.lane]))
    lanes = "".join(
        f'<rect class="lane-bg" x="0" y="{AXIS_HEIGHT // 2 + i * LANE_HEIGHT + 1}" '
        f'width="{WIDTH}" height="{LANE_HEIGHT - 2}"/>'
        f'<text x="4" y="{AXIS_HEIGHT // 2 + i * LANE_HEIGHT + 15}">{html.escape(lane)}</text>'
        for i, lane in enumerate(axis.lanes))
    left_out = {lane: count - MAX_PER_LANE for lane, count in kept.items()
                if count > MAX_PER_LANE}
    notes = [f"{lane}: the first {MAX_PER_LANE} of {MAX_PER_LANE + n} events shown"
             for lane, n in left_out.items()]
    if axis.faults_before_log and axis.log_start is not None:
        offset, _ = axis.log_start
        notes.append(f"{axis.faults_before_log} fault(s) began before the log's tables do "
                     f"(offset {offset}: the snapshot the reference log starts at); what they "
                     "did before it is not in the log")
    if axis.untimed:
        notes.append(f"{axis.untimed} event(s) without a time (batches written before "
                     "batches were timed) not shown")
    return (f'<div class="axis-controls"><button id="zoom-in">zoom in</button>'
            f'<button id="zoom-out">zoom out</button><button id="zoom-reset">whole log'
            f'</button> <span id="axis-window"></span></div>'
            f'<svg id="axis-svg" viewBox="0 0 {WIDTH} {height}" data-label="{LABEL_WIDTH}" '
            f'data-width="{WIDTH}" data-height="{height}" data-start="{axis.start_ms}" '
            f'data-end="{axis.end_ms}">'
            f'<defs><clipPath id="axis-clip"><rect x="{LABEL_WIDTH}" y="0" '
            f'width="{WIDTH - LABEL_WIDTH}" height="{height}"/></clipPath></defs>{lanes}'
            f'<g id="axis-ticks"></g>'
            f'<g id="axis-events" clip-path="url(#axis-clip)">{"".join(rects)}</g></svg>'
            f'<p id="axis-info">Wheel or the buttons zoom, dragging pans; click an event '
            f'for its details, a topic event for its story.</p>'
            + "".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes))


def _percent_bar(part: int | None, whole: int | None, kind: str) -> str:
    if part is None:
        return "<td>unknown</td>"
    share = 0.0 if not whole else min(1.0, part / whole)
    return (f"<td>{part} ms <span class='bar {kind}' style='width:{share * 6:.2f}em'>"
            f"</span> {share:.0%}</td>")


def _availability_table(rows: Sequence[Sequence[Any]]) -> str:
    ranked = sorted(rows, key=lambda r: (-(r[8] or 0), -(r[10] or 0), -(r[9] or 0), r[3]))
    body = "".join(
        f"<tr class='availability'><td>{html.escape(str(r[1]))}</td><td>{r[2]}</td>"
        f"<td>{'unknown' if _lived(r) is None else _lived(r)}</td>"
        + _percent_bar(r[8], _lived(r), "nl") + _percent_bar(r[9], _lived(r), "ur")
        + _percent_bar(r[10], _lived(r), "mi")
        + f"<td>{r[11]}</td><td>{html.escape(r[7])}</td></tr>"
        for r in ranked[:MAX_AVAILABILITY_ROWS])
    more = len(ranked) - MAX_AVAILABILITY_ROWS
    return ("<table id='availability'><tr><th>topic</th><th>partition</th><th>lived (ms)</th>"
            "<th>without a leader</th><th>under-replicated</th>"
            "<th>below min.insync.replicas</th><th>min.insync</th><th>ended by</th></tr>"
            f"{body}</table>"
            + (f"<p class='note'>the {MAX_AVAILABILITY_ROWS} partitions longest without a "
               f"leader shown; {more} more in partition_availability.parquet</p>"
               if more > 0 else ""))


def _lived(row: Sequence[Any]) -> int | None:
    """A partition life's length in ms (None without times)."""
    return None if row[6] is None or row[4] is None else int(row[6] - row[4])


def _topics_table(stories: dict[str, list[dict[str, Any]]]) -> str:
    rows = []
    for topic_id, story in stories.items():
        names = " / ".join(dict.fromkeys(str(e["name"]) for e in story))
        deleted = next((e["offset"] for e in story if e["event"] == "delete"), None)
        rows.append(f"<tr class='topic' data-topic='{html.escape(topic_id)}'>"
                    f"<td>{html.escape(names)}</td><td>{html.escape(topic_id)}</td>"
                    f"<td>{story[0]['offset']}</td><td>{'' if deleted is None else deleted}"
                    f"</td><td>{len(story)}</td></tr>")
    return ("<table id='topics'><tr><th>names</th><th>topic id</th><th>first offset</th>"
            "<th>deleted at offset</th><th>events</th></tr>" + "".join(rows) + "</table>")


def time_axis_html(axis: Axis, timeline: Timeline,
                   availability: Sequence[Sequence[Any]]) -> str:
    """The section, with its style and script."""
    every_story = topic_stories(timeline)
    stories = dict(islice(every_story.items(), MAX_TOPICS))
    data = json.dumps(stories, default=str).replace("</", "<\\/")
    more = len(every_story) - len(stories)
    timeline_part = _timeline_svg(axis) if axis.events else \
        "<p>No event of the log has a time (batches written before batches were timed).</p>"
    return (f"<style>{STYLE}</style><section id='time-axis'><h2>Timeline</h2>{timeline_part}"
            f"<h2>Availability per partition</h2>{_availability_table(availability)}"
            f"<h2>Topics</h2><p>Click a topic (or a topic event on the timeline) for its "
            f"story.</p>{_topics_table(stories)}"
            + (f"<p class='note'>the first {MAX_TOPICS} topics shown; {more} more in "
               f"topic_lifecycle.parquet</p>" if more > 0 else "")
            + f"<div id='story'></div>"
            f"<script type='application/json' id='topic-stories'>{data}</script>"
            f"<script>{SCRIPT}</script></section>")
