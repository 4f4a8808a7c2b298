import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { SLACK_EVENTS_PATH } from '../../src/slack/app.js';
import { COMMAND } from '../../src/slack/listeners/commands.js';

/** The manifest a person pastes into api.slack.com must match what the code listens for. */
describe('slack-app-manifest.yml', () => {
  const manifest = parse(readFileSync(new URL('../../slack-app-manifest.yml', import.meta.url), 'utf8'));
  const url = `https://herald.example.com${SLACK_EVENTS_PATH}`;

  it('declares the command, interactivity, the home tab and events at /slack/events', () => {
    expect(manifest._metadata.major_version).toBe(1);
    expect(manifest.display_information.name).toBe('Herald');
    expect(manifest.features.slash_commands).toEqual([
      expect.objectContaining({ command: COMMAND, url, should_escape: false }),
    ]);
    expect(manifest.features.app_home.home_tab_enabled).toBe(true);
    expect(manifest.features.bot_user.display_name).toBeTruthy();
    expect(manifest.settings.interactivity).toEqual({
      is_enabled: true,
      request_url: url,
      message_menu_options_url: url,
    });
    expect(manifest.settings.event_subscriptions).toEqual({ request_url: url, bot_events: ['app_home_opened'] });
  });

  it('asks for exactly the bot scopes Herald uses', () => {
    expect(manifest.oauth_config.scopes.bot).toEqual(['commands', 'chat:write', 'chat:write.public', 'im:write']);
    expect(manifest.oauth_config.scopes.user).toBeUndefined();
  });

  it('keeps Slack’s length limits', () => {
    expect(manifest.display_information.description.length).toBeLessThanOrEqual(140);
    expect(manifest.features.slash_commands[0].description.length).toBeLessThanOrEqual(100);
    expect(manifest.features.slash_commands[0].usage_hint.length).toBeLessThanOrEqual(100);
    expect(manifest.features.bot_user.display_name.length).toBeLessThanOrEqual(80);
  });
});
