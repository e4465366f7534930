// The users of the caller's own org (admin:write): invite, list, read, remove. Removing a
// user revokes every key it owns. No mail is sent and nobody logs in here: an invite is a
// record and a user.invited webhook event the provider can turn into an email.
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ListOf, StringEnum, responses } from '../http/schemas.js';
import { ROLES, ROLE_SCOPES } from '../users/roles.js';
import { userView, type UserService } from '../users/user-service.js';

const roleHelp = ROLES.map((r) => `${r}: ${ROLE_SCOPES[r].join(', ')}`).join('; ');

export const UserView = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('user'),
    email: Type.String({ description: 'Lower-case; unique within the organization.' }),
    role: StringEnum(ROLES, { description: `The most the user's keys may hold. ${roleHelp}` }),
    status: StringEnum(['invited', 'active'] as const, { description: 'invited until the provider records the invite as taken up.' }),
    org_id: Type.String(),
    created: Type.Integer(),
  },
  { $id: 'User' },
);

const UserIdParams = Type.Object({ user_id: Type.String({ minLength: 1, maxLength: 64 }) });

export function adminUserRoutes(users: UserService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(UserView);
    const config = { scope: 'admin:write' as const };
    const tags = ['organization'];

    app.post(
      '/admin/users',
      {
        config,
        schema: {
          tags,
          operationId: 'inviteUser',
          summary: 'Invite a user by email with a role; sends a user.invited webhook event (no email is sent by the service)',
          body: Type.Object(
            {
              email: Type.String({ minLength: 3, maxLength: 254 }),
              role: StringEnum(ROLES, { description: roleHelp }),
            },
            { additionalProperties: false },
          ),
          response: responses({ 201: Type.Ref(UserView) }),
        },
      },
      async (request, reply) => {
        const { org, key } = request.principal!;
        const user = await users.invite(org.id, request.body, key.id);
        return reply.code(201).send(userView(user));
      },
    );

    app.get(
      '/admin/users',
      { config, schema: { tags, operationId: 'listUsers', summary: 'List the users of your organization', response: responses({ 200: ListOf(Type.Ref(UserView)) }) } },
      async (request) => ({ object: 'list' as const, data: (await users.list(request.principal!.org.id)).map(userView) }),
    );

    app.get(
      '/admin/users/:user_id',
      {
        config,
        schema: { tags, operationId: 'getUser', summary: 'Read one user of your organization', params: UserIdParams, response: responses({ 200: Type.Ref(UserView) }) },
      },
      async (request) => userView(await users.get(request.params.user_id, request.principal!.org.id)),
    );

    app.patch(
      '/admin/users/:user_id',
      {
        config,
        schema: {
          tags,
          operationId: 'updateUser',
          summary: "Change a user's role; a narrower role must still cover the user's live keys",
          params: UserIdParams,
          body: Type.Object({ role: StringEnum(ROLES, { description: roleHelp }) }, { additionalProperties: false }),
          response: responses({ 200: Type.Ref(UserView) }),
        },
      },
      async (request) => userView(await users.setRole(request.params.user_id, request.principal!.org.id, request.body.role)),
    );

    app.delete(
      '/admin/users/:user_id',
      {
        config,
        schema: {
          tags,
          operationId: 'removeUser',
          summary: 'Remove a user and revoke every key it owns, at once',
          params: UserIdParams,
          response: responses({
            200: Type.Object({
              id: Type.String(),
              object: Type.Literal('user'),
              deleted: Type.Literal(true),
              revoked_key_ids: Type.Array(Type.String(), { description: 'Keys this removal revoked; each also gets a key.revoked event.' }),
            }),
          }),
        },
      },
      async (request) => {
        const removed = await users.remove(request.params.user_id, request.principal!.org.id);
        return { id: removed.user.id, object: 'user' as const, deleted: true as const, revoked_key_ids: removed.revokedKeys.map((k) => k.id) };
      },
    );
  };
}
