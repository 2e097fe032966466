import { Type, type Static } from '@sinclair/typebox';

/** One offending field of a request, named by its JSON pointer (RFC 6901). */
export const FieldErrorSchema = Type.Object({
  pointer: Type.String(),
  detail: Type.String(),
});

/** RFC 9457 problem details, the body of every error response. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    instance: Type.Optional(Type.String()),
    errors: Type.Optional(Type.Array(FieldErrorSchema)),
  },
  {},
);

export type FieldError = Static<typeof FieldErrorSchema>;
export type Problem = Static<typeof ProblemSchema>;

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
