/**
 * The page's mustache templates. They live in code, not in files beside it, so that the bundled
 * server (scripts/bundle.mjs) carries them. `{{x}}` escapes; the only `{{{x}}}` are the icons
 * (constants of icons.ts) and the day bars, which view.ts builds with every text escaped.
 */

/** `at`: a TimeView (view.ts). */
const time = '{{#at}}<time datetime="{{iso}}" title="{{utc}}">{{text}}</time>{{/at}}';

/** `st`: a StatusView (view.ts): icon, text and colour together, never colour alone. */
const status = '{{#st}}<span class="st st-{{status}}">{{{icon}}}<span>{{label}}</span></span>{{/st}}';

/** A past incident in a list (history, recent): name, state, impact, start – end, latest words. */
const historyCard = `<article class="card incident impact-{{impact}}{{#resolved}} resolved{{/resolved}}" aria-labelledby="hi-{{id}}">
<h3 id="hi-{{id}}"><a href="{{href}}">{{name}}</a></h3>
<p class="meta">{{state}} · {{impactLabel}} · ${time}{{#resolvedAt}} – {{#at}}<time datetime="{{iso}}" title="{{utc}}">{{text}}</time>{{/at}}{{/resolvedAt}}</p>
{{#latest}}<p class="body excerpt">{{latest}}</p>{{/latest}}
</article>`;

/** A sentence with times in it (`parts`: text, or a time). */
const sentence = '{{#parts}}{{text}}{{#at}}<time datetime="{{iso}}" title="{{utc}}">{{text}}</time>{{/at}}{{/parts}}';

const layout = `<!doctype html>
<html lang="{{lang}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{documentTitle}}</title>
<link rel="stylesheet" href="{{links.css}}">
{{#feeds}}
<link rel="alternate" type="{{type}}" title="{{title}}" href="{{href}}">
{{/feeds}}
{{#canonical}}
<link rel="canonical" href="{{canonical}}">
{{/canonical}}
</head>
<body>
<a class="skip" href="#main">{{s.skip}}</a>
<header class="site">
<div class="wrap head">
<a class="brand" href="{{links.home}}">{{#logo}}<img src="{{logo}}" alt="" width="32" height="32">{{/logo}}<span>{{title}}</span></a>
<nav aria-label="{{s.nav_label}}">
<ul>
<li><a href="{{links.home}}"{{#nav.home}} aria-current="page"{{/nav.home}}>{{s.nav_current}}</a></li>
<li><a href="{{links.history}}"{{#nav.history}} aria-current="page"{{/nav.history}}>{{s.nav_history}}</a></li>
{{#support}}
<li><a href="{{support}}">{{s.nav_support}}</a></li>
{{/support}}
</ul>
</nav>
</div>
</header>
<main id="main" tabindex="-1">
<div class="wrap">
{{> content}}
</div>
</main>
<footer class="site">
<div class="wrap">
<p>{{footerZone}}</p>
<p>{{s.subscribe}}: <a href="{{links.atom}}">{{s.atom_feed}}</a> · <a href="{{links.rss}}">{{s.rss_feed}}</a> · <a href="{{links.api}}">{{s.json_api}}</a></p>
<p>{{s.language}}: {{#languages}}{{^first}} · {{/first}}{{#current}}<strong lang="{{code}}" aria-current="true">{{name}}</strong>{{/current}}{{^current}}<a href="?locale={{code}}" lang="{{code}}" hreflang="{{code}}">{{name}}</a>{{/current}}{{/languages}}</p>
<p>{{s.powered}}</p>
</div>
</footer>
</body>
</html>
`;

const updates = `<ol class="updates">
{{#updates}}
<li class="update">
<p class="update-head"><strong>{{state}}</strong> · ${time}{{#edited}} · <em>{{label}} ${time}</em>{{/edited}}</p>
<p class="body">{{body}}</p>
</li>
{{/updates}}
</ol>`;

const incidentCard = `<article class="card incident impact-{{impact}}" aria-labelledby="inc-{{id}}">
<h3 id="inc-{{id}}"><a href="{{href}}">{{name}}</a></h3>
<p class="meta">{{state}} · {{impactLabel}}{{#affected}} · {{affected}}{{/affected}}</p>
${updates}
</article>`;

const maintenanceCard = `<article class="card maintenance" aria-labelledby="mnt-{{id}}">
<h3 id="mnt-{{id}}"><a href="{{href}}">{{name}}</a></h3>
<p class="meta">{{state}} · {{#window}}${sentence}{{/window}}{{#affected}} · {{affected}}{{/affected}}</p>
{{#latest}}<p class="body">{{latest}}</p>{{/latest}}
</article>`;

const uptime = `<div class="uptime">
<p class="uptime-sum">{{uptimeText}}</p>
<ol class="bars" aria-label="{{barsLabel}}">
{{{bars}}}
</ol>
<p class="axis" aria-hidden="true"><span class="from90">{{axisFrom}}</span><span class="from30">{{axisFrom30}}</span><span>{{axisTo}}</span></p>
</div>`;

const componentRow = `<li class="component">
<div class="row"><span class="name">{{name}}</span>${status}</div>
{{#description}}<p class="desc">{{description}}</p>{{/description}}
${uptime}
</li>`;

/** A section of cards shown only when it has any: `flag` the view's boolean, `list` its items. */
const cardSection = (flag: string, id: string, heading: string, list: string, card: string): string =>
  `{{#${flag}}}
<section aria-labelledby="${id}">
<h2 id="${id}">{{${heading}}}</h2>
{{#${list}}}
${card}
{{/${list}}}
</section>
{{/${flag}}}`;

const index = `<h1>{{heading}}</h1>
<p class="banner banner-{{indicator}}">{{{bannerIcon}}}<span>{{bannerText}}</span></p>
${cardSection('hasActive', 'h-active', 's.active_incidents', 'active', incidentCard)}
${cardSection('hasActiveMaintenance', 'h-mnt-active', 's.active_maintenance', 'activeMaintenance', maintenanceCard)}
${cardSection('hasUpcoming', 'h-mnt-upcoming', 's.upcoming_maintenance', 'upcoming', maintenanceCard)}
<section aria-labelledby="h-components">
<h2 id="h-components">{{s.components}}</h2>
<p class="legend">{{uptimeHeading}}</p>
{{^hasEntries}}<p>{{s.no_components}}</p>{{/hasEntries}}
<ul class="components">
{{#entries}}
{{#group}}
<li class="group">
<h3 class="row"><span class="name">{{name}}</span>${status}</h3>
<ul class="members">
{{#members}}
${componentRow}
{{/members}}
</ul>
</li>
{{/group}}
{{#component}}
${componentRow}
{{/component}}
{{/entries}}
</ul>
</section>
<section aria-labelledby="h-recent">
<h2 id="h-recent">{{s.recent_incidents}}</h2>
{{^hasRecent}}<p>{{noRecent}}</p>{{/hasRecent}}
{{#recent}}
${historyCard}
{{/recent}}
<p><a href="{{links.history}}">{{s.all_history}}</a></p>
</section>
<section aria-labelledby="h-subscribe">
<h2 id="h-subscribe">{{s.subscribe}}</h2>
<ul class="list">
<li><a href="{{links.atom}}">{{s.atom_feed}}</a></li>
<li><a href="{{links.rss}}">{{s.rss_feed}}</a></li>
</ul>
{{#hasComponentFeeds}}
<details class="feeds">
<summary>{{s.feeds_per_component}}</summary>
<ul class="list">
{{#componentFeeds}}
<li>{{name}}: <a href="{{atom}}">{{s.atom_feed}}</a> · <a href="{{rss}}">{{s.rss_feed}}</a></li>
{{/componentFeeds}}
</ul>
</details>
{{/hasComponentFeeds}}
{{#emailForm}}
<form class="subscribe" method="post" action="{{action}}">
<h3 id="h-subscribe-email">{{s.email_subscribe}}</h3>
<input type="hidden" name="locale" value="{{lang}}">
<p><label for="sub-email">{{s.email_label}}</label><br>
<input id="sub-email" name="email" type="email" autocomplete="email" required maxlength="254" aria-describedby="sub-email-hint"></p>
<p id="sub-email-hint" class="legend">{{s.email_hint}}</p>
<div class="vh" aria-hidden="true"><label for="sub-website">{{s.email_honeypot}}</label><input id="sub-website" name="website" type="text" tabindex="-1" autocomplete="off"></div>
{{#hasChoices}}
<details class="feeds">
<summary>{{s.email_choose}}</summary>
<fieldset>
<legend>{{s.email_choose_legend}}</legend>
<ul class="list">
{{#choices}}
{{#group}}
<li><fieldset>
<legend>{{name}}</legend>
<ul class="list">
{{#members}}
<li><label><input type="checkbox" name="components" value="{{id}}"> {{name}}</label></li>
{{/members}}
</ul>
</fieldset></li>
{{/group}}
{{#component}}
<li><label><input type="checkbox" name="components" value="{{id}}"> {{name}}</label></li>
{{/component}}
{{/choices}}
</ul>
</fieldset>
</details>
{{/hasChoices}}
<p><button type="submit">{{s.email_submit}}</button></p>
</form>
{{/emailForm}}
</section>`;

/** An incident's or a maintenance's own page: its state, `extra` (the window), affected components, updates. */
const detailPage = (extra: string): string => `<p class="crumb"><a href="{{links.home}}">{{s.back_home}}</a></p>
<h1>{{name}}</h1>
<p class="banner banner-{{bannerClass}}">{{{bannerIcon}}}<span>{{bannerText}}</span></p>
${extra}{{#hasAffected}}
<h2>{{s.affected}}</h2>
<ul class="affected">
{{#affectedList}}<li class="row"><span class="name">{{name}}</span>${status}</li>{{/affectedList}}
</ul>
{{/hasAffected}}
<section aria-labelledby="h-updates">
<h2 id="h-updates">{{updatesHeading}}</h2>
${updates}
</section>`;

const incident = detailPage('');

const maintenance = detailPage(`<p>{{#window}}${sentence}{{/window}}</p>\n`);

const history = `<h1>{{s.history_title}}</h1>
{{^hasItems}}<p>{{s.history_empty}}</p>{{/hasItems}}
{{#months}}
<section aria-labelledby="m-{{key}}">
<h2 id="m-{{key}}">{{label}}</h2>
{{#items}}
${historyCard}
{{/items}}
</section>
{{/months}}
{{#paged}}
<nav aria-label="{{s.pagination}}" class="pager">
<p>{{pageOf}}</p>
<ul>
{{#newer}}<li><a rel="prev" href="{{newer}}">{{s.newer}}</a></li>{{/newer}}
{{#older}}<li><a rel="next" href="{{older}}">{{s.older}}</a></li>{{/older}}
</ul>
</nav>
{{/paged}}`;

const message = `<h1>{{heading}}</h1>
<p>{{body}}</p>
{{#showHome}}<p><a href="{{links.home}}">{{s.back_home}}</a></p>{{/showHome}}`;

/** A page without the page's config (not set up, unavailable): no header links, no feeds. */
const bare = `<!doctype html>
<html lang="{{lang}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{heading}}</title>
<link rel="stylesheet" href="{{css}}">
</head>
<body>
<main id="main">
<div class="wrap">
<h1>{{heading}}</h1>
<p>{{body}}</p>
</div>
</main>
</body>
</html>
`;

export const TEMPLATES = { layout, index, incident, maintenance, history, message, bare } as const;
