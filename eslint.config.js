// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The layer rules: what each folder may never import (dependencies point inward). */
const layer = (files, patterns) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns }] },
});
/** The I/O half of the channel modules, reached only through the registry's lazy `adapter()`. */
const channelIo = ['**/channels/*/send*', '**/channels/adapter*', '**/common/http-outcome*'];
const io = [
  'ioredis',
  'bullmq',
  'express',
  '@slack/*',
  'nodemailer',
  'pino',
  'node:fs*',
  'node:net',
  'node:http*',
  'node:dns*',
];

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', 'coverage/**', 'manifest/**', 'dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  // A function a reader cannot hold in one screen gets split, or says why it may not be
  // (`// eslint-disable-next-line max-lines-per-function -- <reason>`). Tests are tables of cases.
  // 80 lines: the formatter lays calls out one argument per line, so a screen holds fewer statements.
  {
    files: ['src/**'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  layer(
    ['src/domain/**'],
    [
      {
        group: [
          ...io,
          '**/services/**',
          '**/store/**',
          '**/delivery/**',
          '**/http/**',
          '**/slack/**',
          '**/cli/**',
          '**/ports*',
          '**/app*',
          '**/composition/**',
          '**/config*',
          ...channelIo,
        ],
        message: 'domain is pure: no I/O and no outer layers',
      },
    ],
  ),
  // A channel module's pure half (config, escape, index) is read by the domain: it follows the
  // domain's rules, except that it may name types of the I/O half it loads lazily.
  {
    files: ['src/channels/**'],
    ignores: ['src/channels/*/send.ts', 'src/channels/adapter.ts', 'src/channels/common/http-outcome.ts'],
    // (Relative patterns for the Slack edge and the app config: src/channels/slack/ and each
    // type's config.ts share their names.)
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                ...io,
                '**/services/**',
                '**/store/**',
                '**/delivery/**',
                '**/http/**',
                '../../slack/**',
                '**/cli/**',
                '**/ports*',
                '**/app*',
                '**/composition/**',
                '../config*',
                '../../config*',
                ...channelIo,
              ],
              allowTypeImports: true,
              message: "a channel's pure half: no I/O (send.ts is loaded through adapter())",
            },
          ],
        },
      ],
    },
  },
  layer(
    ['src/channels/*/send.ts', 'src/channels/adapter.ts', 'src/channels/common/http-outcome.ts'],
    [
      {
        group: [
          '**/services/**',
          '**/store/**',
          '**/http/**',
          '**/slack/**',
          '**/cli/**',
          '**/app*',
          '**/composition/**',
        ],
        message: 'a sender is an adapter: it never imports services or edges',
      },
    ],
  ),
  layer(
    ['src/services/**'],
    [
      {
        group: [
          ...io,
          ...channelIo,
          '**/store/**',
          '**/delivery/**',
          '**/http/**',
          '**/slack/**',
          '**/cli/**',
          '**/app*',
          '**/composition/**',
        ],
        message: 'services see the world only through src/ports/',
      },
    ],
  ),
  layer(
    ['src/store/**', 'src/delivery/**'],
    [
      {
        group: ['**/services/**', '**/http/**', '**/slack/**', '**/cli/**', '**/app*', '**/composition/**'],
        message: 'adapters never import services or edges',
      },
    ],
  ),
  layer(
    ['src/http/**'],
    [
      {
        group: ['ioredis', 'bullmq', '**/store/**', '**/delivery/**', '**/slack/**', '**/cli/**'],
        message: 'http talks to services and domain only',
      },
    ],
  ),
  layer(
    ['src/slack/**'],
    [
      {
        group: ['ioredis', 'bullmq', '**/store/**', '**/delivery/**', '**/http/**', '**/cli/**'],
        message: 'slack talks to services and domain only',
      },
    ],
  ),
  layer(
    ['src/cli/**'],
    [
      {
        group: ['ioredis', 'bullmq', '**/store/**', '**/delivery/**', '**/http/**', '**/slack/**'],
        message: 'cli talks to services and domain only',
      },
    ],
  ),
  {
    files: ['test/**', 'bench/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
  // Plain Node scripts (no TypeScript project): the JavaScript rules only.
  {
    files: ['scripts/**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { parserOptions: { projectService: false }, globals: { process: 'readonly', Buffer: 'readonly' } },
  },
);
