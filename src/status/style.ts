import { createHash } from 'node:crypto';

/**
 * The page's one stylesheet, served as a file (the CSP allows no inline style) under a name with
 * its hash, so it can be cached for a year and a new build is fetched at once. Colours: every
 * text colour has at least 4.5:1 against its background, and the status colours at least 3:1
 * against white as graphics (WCAG 2.2 AA 1.4.3, 1.4.11); status is never shown by colour alone.
 */
export const STYLE = `
:root{--fg:#1f2328;--muted:#57606a;--bg:#fff;--soft:#f6f8fa;--line:#d0d7de;--link:#0550ae;
--ok:#1a7f37;--maint:#0969da;--minor:#9a6700;--major:#bc4c00;--crit:#cf222e;--none:#6e7781}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--soft);min-height:100vh;display:flex;flex-direction:column}
.wrap{max-width:52rem;margin:0 auto;padding:0 1rem}
a{color:var(--link)}
a:focus-visible,main:focus-visible,summary:focus-visible{outline:3px solid var(--link);outline-offset:2px;border-radius:2px}
.skip{position:absolute;left:-999px;top:0;background:var(--fg);color:#fff;padding:.5rem 1rem;z-index:10}
.skip:focus{left:.5rem;top:.5rem;color:#fff}
header.site{background:var(--bg);border-bottom:1px solid var(--line)}
.head{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;gap:.5rem;padding-top:.75rem;padding-bottom:.75rem}
.brand{display:flex;align-items:center;gap:.5rem;font-weight:600;font-size:1.15rem;color:var(--fg);text-decoration:none;overflow-wrap:anywhere}
.brand img{border-radius:4px}
nav ul{display:flex;flex-wrap:wrap;gap:.25rem 1rem;list-style:none;margin:0;padding:0}
nav a[aria-current]{font-weight:600}
main{display:block;flex:1 0 auto;padding:1.5rem 0 2rem}
main:focus{outline:none}
h1{font-size:1.6rem;line-height:1.25;margin:.25rem 0 1rem;overflow-wrap:anywhere}
h2{font-size:1.2rem;margin:2rem 0 .75rem}
h3{font-size:1rem;margin:0}
section{margin:0}
.banner{display:flex;align-items:center;gap:.6rem;margin:0 0 1.5rem;padding:1rem 1.25rem;border-radius:6px;color:#fff;font-size:1.15rem;font-weight:600}
.banner .icon{width:1.4rem;height:1.4rem;color:#fff}
.banner-none{background:var(--ok)}.banner-maintenance{background:var(--maint)}.banner-minor{background:var(--minor)}
.banner-major{background:var(--major)}.banner-critical{background:var(--crit)}
.banner-none .icon path[stroke]{stroke:var(--ok)}.banner-maintenance .icon path[stroke]{stroke:var(--maint)}
.banner-minor .icon path[stroke]{stroke:var(--minor)}.banner-major .icon path[stroke]{stroke:var(--major)}
.banner-critical .icon path[stroke]{stroke:var(--crit)}
.card{background:var(--bg);border:1px solid var(--line);border-left:4px solid var(--minor);border-radius:6px;padding:1rem;margin:0 0 1rem}
.impact-none{border-left-color:var(--none)}.impact-major{border-left-color:var(--major)}.impact-critical{border-left-color:var(--crit)}
.maintenance{border-left-color:var(--maint)}
.meta{color:var(--muted);font-size:.9rem;margin:.25rem 0}
.body{white-space:pre-line;overflow-wrap:anywhere;margin:.25rem 0 0}
.updates{list-style:none;margin:.75rem 0 0;padding:0}
.update{border-top:1px solid var(--line);padding:.6rem 0}
.update-head{margin:0;font-size:.9rem;color:var(--muted)}
.update-head strong{color:var(--fg)}
.components,.members{list-style:none;margin:0;padding:0}
.components{background:var(--bg);border:1px solid var(--line);border-radius:6px}
.components>li{border-top:1px solid var(--line);padding:.9rem 1rem}
.components>li:first-child{border-top:0}
.members>li{border-top:1px dashed var(--line);padding:.75rem 0 .5rem 1rem;margin-top:.6rem}
.row{display:flex;flex-wrap:wrap;justify-content:space-between;align-items:center;gap:.25rem .75rem}
.name{font-weight:600;overflow-wrap:anywhere}
.desc{color:var(--muted);font-size:.9rem;margin:.15rem 0 0}
.st{display:inline-flex;align-items:center;gap:.35rem;font-size:.9rem;font-weight:600}
.st-operational{color:var(--ok)}.st-under_maintenance{color:var(--maint)}.st-degraded_performance{color:var(--minor)}
.st-partial_outage{color:var(--major)}.st-major_outage{color:var(--crit)}
.legend{color:var(--muted);font-size:.9rem}
.uptime{margin-top:.5rem}
.uptime-sum{margin:0 0 .25rem;font-size:.85rem;color:var(--muted);text-align:right}
.bars{display:flex;gap:1px;list-style:none;margin:0;padding:0;height:2rem}
.d{flex:1 1 0;min-width:0;border-radius:1px;background:var(--ok)}
.d-none{background:#8c959f}.d-under_maintenance{background:var(--maint)}.d-degraded_performance{background:var(--minor)}
.d-partial_outage{background:var(--major)}.d-major_outage{background:var(--crit)}
.axis{display:flex;justify-content:space-between;margin:.2rem 0 0;font-size:.8rem;color:var(--muted)}
.axis .from30{display:none}
.affected{list-style:none;padding:0;margin:0 0 1rem;background:var(--bg);border:1px solid var(--line);border-radius:6px}
.affected li{padding:.6rem 1rem;border-top:1px solid var(--line)}.affected li:first-child{border-top:0}
.resolved{border-left-color:var(--ok)}
.excerpt{color:var(--fg);font-size:.95rem}
.feeds summary{cursor:pointer;color:var(--link)}
footer.site strong{color:var(--fg)}
.list{padding-left:1.2rem}
.list li{margin:.3rem 0;overflow-wrap:anywhere}
.pager ul{display:flex;gap:1rem;list-style:none;padding:0}
.crumb{margin:0 0 .5rem;font-size:.9rem}
footer.site{border-top:1px solid var(--line);background:var(--bg);color:var(--muted);font-size:.9rem;padding:1rem 0}
footer.site p{margin:.25rem 0}
form.subscribe{margin-top:1.5rem;padding:1rem 1.25rem;background:var(--bg);border:1px solid var(--line);border-radius:6px}
form.subscribe h3{margin:0 0 .5rem}
label{font-weight:600}
label:has(input[type=checkbox]){font-weight:400;display:inline-flex;align-items:center;gap:.5rem;cursor:pointer}
input[type=email],select{font:inherit;color:var(--fg);background:var(--bg);padding:.45rem .6rem;border:1px solid #6e7781;border-radius:6px;max-width:100%}
input[type=email]{width:24rem;margin-top:.25rem}
input[type=checkbox]{width:1.1rem;height:1.1rem;accent-color:var(--link)}
button{font:inherit;font-weight:600;padding:.5rem 1.1rem;border:1px solid var(--link);border-radius:6px;background:var(--link);color:#fff;cursor:pointer}
button:hover{background:#033d8b}
button.secondary{background:var(--bg);color:var(--crit);border-color:var(--crit)}
input:focus-visible,select:focus-visible,button:focus-visible{outline:3px solid var(--link);outline-offset:2px}
fieldset{border:1px solid var(--line);border-radius:6px;margin:.75rem 0;padding:.5rem 1rem;background:var(--bg)}
legend{font-weight:600;padding:0 .25rem}
fieldset .list{list-style:none;padding-left:0}
.vh{position:absolute!important;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;border:0}
@media (max-width:37.5rem){.bars .d:nth-child(-n+60){display:none}.bars{gap:2px}.axis .from90{display:none}.axis .from30{display:inline}}
@media (max-width:30rem){h1{font-size:1.35rem}.banner{font-size:1rem}.components>li{padding:.75rem}}
@media (prefers-reduced-motion:reduce){*{transition:none!important}}
`;

/** The stylesheet's file name: its content hash, so a changed sheet is a new URL. */
export const STYLE_FILE = `style-${createHash('sha256').update(STYLE).digest('hex').slice(0, 12)}.css`;
