//! The object's programs by name and kind, for every kind of attach.

use aya::{
    Ebpf,
    programs::{Program, ProgramError},
};

use super::error::AttachError;

/// The program `name` of the object, as program type `T`.
pub(crate) fn typed<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T, AttachError>
where
    &'a mut T: TryFrom<&'a mut Program, Error = ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| AttachError::Missing(name.to_owned()))?
        .try_into()
        .map_err(|e| AttachError::WrongKind(name.to_owned(), e))
}
