import type { MessageAction, OutboundMessage } from '../../contracts/channel.js';

/**
 * Runs the handler for the message's action (absent means `post`): how a sender that can edit
 * and delete (Slack bot, Discord, Telegram) branches, in one place.
 */
export function byAction<R>(message: Pick<OutboundMessage, 'action'>, handlers: Record<MessageAction, () => R>): R {
  return handlers[message.action ?? 'post']();
}
