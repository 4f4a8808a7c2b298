/** Types of scripts/commit-msg.mjs for the TypeScript tests that import it. */
export declare const MAX_SUBJECT: number;
export declare function messageLines(text: string): string[];
export declare function checkCommitMessage(text: string): string[];
